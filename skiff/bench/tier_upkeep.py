"""What an upload pass costs when it uploads nothing: ``python -m skiff.bench.tier_upkeep``.

In this process: a store (`skiff.bench.compaction`'s), one compacted tiered queue of ``--rounds``
unmerged files (``--messages`` new keys each, uploaded with merging off, as a queue that went
quiet before ``tierCompactedMergeMaxBytes`` was raised, or under an older build, holds them) and
the broker's uploader over a filesystem tier in a temporary directory. Then, each timed in this
process's CPU:

- ``--passes`` passes with nothing to upload or merge (the merge decided from the manifest);
- the passes of a restarted uploader that record ``tombstoneMs`` for files whose manifest rows
  lack it (as an older build wrote them), 16 files a pass, per file and per MB fetched;
- the one pass that merges the quiet queue once the merge size is the default: CPU per row merged,
  and what it fetched;
- ``--passes`` passes with nothing to do again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from skiff.bench.compaction import TOPIC, _store, _write
from skiff.broker.config import BrokerConfig
from skiff.broker.tier.uploader import TierUploader
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import SYSTEM_CLOCK
from skiff.common.limits import TIER_COMPACTED_MERGE_MAX_BYTES
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageStore
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY
from skiff.tier.backends import FilesystemBackend
from skiff.tier.manifest import manifest_file
from skiff.tier.tier import FileCache, Tier

_MB = 1_000_000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m skiff.bench.tier_upkeep", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=16, help="files of the quiet queue (default 16)")
    p.add_argument("--messages", type=int, default=5_000, help="messages (new keys) per file (default 5000)")
    p.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    p.add_argument("--passes", type=int, default=20, help="idle passes timed (default 20)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


class _CountingBackend(FilesystemBackend):
    """A filesystem tier that counts the bytes fetched."""

    fetched = 0

    def get(self, key: str) -> bytes:
        data = super().get(key)
        self.fetched += len(data)
        return data


def _cpu(fn: Any) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def _idle_us(uploader: TierUploader, passes: int) -> dict[str, float]:
    runs = [_cpu(uploader.run) * 1e6 for _ in range(passes)]
    return {"median_us": round(statistics.median(runs)), "min_us": round(min(runs))}


def _quiet_queue(store: MessageStore, uploader: TierUploader, rounds: int, messages: int, size: int) -> None:
    uploader.tier.merge_max_bytes = 1  # merging off while the queue receives
    for r in range(rounds):
        _write(store, messages, 10**12, size, seed=r + 1)  # keys new each round: nothing superseded
        store.compact(TOPIC, 0, delete_retention_ms=86_400_000,
                      max_offset_map_size=4 * messages * OFFSET_MAP_BYTES_PER_ENTRY)
        uploader.run()


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    store = _store(str(work / "store"))
    try:
        topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(work), SYSTEM_CLOCK,
                                    schedule_queue_nums=2)
        topics.put(TopicConfig(TOPIC, 1, 1, attributes={"cleanup.policy": "COMPACTION", "tiered.storage": "true",
                                                        "retention.local.ms": str(365 * 86_400_000)}))
        backend = _CountingBackend(str(work / "tier"))
        uploader = TierUploader(store, topics, Tier(backend), "broker-a", 0, SYSTEM_CLOCK)
        _quiet_queue(store, uploader, args.rounds, args.messages, args.size)
        out: dict[str, Any] = {"files": len(uploader.manifest(TOPIC).segments),
                               "tier_mb": round(uploader.manifest(TOPIC).remote_bytes() / _MB, 3)}
        out["idle_before"] = _idle_us(uploader, args.passes)
        out["learn"], uploader = _learn(backend, store, topics)
        uploader.tier.merge_max_bytes = TIER_COMPACTED_MERGE_MAX_BYTES
        rows = sum(s.rows for s in uploader.manifest(TOPIC).segments[:-1])
        uploader.tier.cache = FileCache()  # cold, as after a restart: every merged file is fetched
        backend.fetched = 0
        cpu = _cpu(uploader.run)
        out["merge"] = {"cpu_ms": round(cpu * 1000, 1), "fetched_mb": round(backend.fetched / _MB, 3),
                        "rows": rows, "cpu_us_per_row": round(cpu * 1e6 / rows, 2),
                        "files_after": len(uploader.manifest(TOPIC).segments)}
        out["idle_after"] = _idle_us(uploader, args.passes)
        return out
    finally:
        store.shutdown()


def _learn(backend: _CountingBackend, store: MessageStore,
           topics: TopicConfigManager) -> tuple[dict[str, Any], TierUploader]:
    """The manifest as an older build wrote it (no tombstoneMs), a restarted uploader's passes until
    every file's is recorded (merging still off); the figures and that uploader."""
    key = manifest_file(TOPIC, "broker-a")
    body = json.loads(backend.get(key))
    for seg in body["segments"]:
        seg.pop("tombstoneMs", None)
    backend.put(key, json.dumps(body).encode())
    uploader = TierUploader(store, topics, Tier(backend, merge_max_bytes=1), "broker-a", 0, SYSTEM_CLOCK)
    files = len(uploader.manifest(TOPIC).segments)
    backend.fetched, cpu, passes = 0, 0.0, 0
    while any(s.oldest_tombstone_ms is None for s in uploader.manifest(TOPIC).segments):
        cpu += _cpu(uploader.run)
        passes += 1
    mb = backend.fetched / _MB
    return {"files": files, "passes": passes, "cpu_ms": round(cpu * 1000, 1), "fetched_mb": round(mb, 3),
            "cpu_ms_per_file": round(cpu * 1000 / files, 2),
            "cpu_ms_per_mb": round(cpu * 1000 / mb, 1) if mb else None}, uploader


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-tier-upkeep-") as tmp:
        f = run(args, Path(tmp))
    if args.json:
        print(json.dumps(f, indent=2))
        return 0
    print(f"a quiet compacted queue of {f['files']} files ({f['tier_mb']} MB), {args.messages} messages of "
          f"{args.size} B each")
    print(f"idle pass, nothing to merge: CPU {f['idle_before']['median_us']} us median "
          f"({f['idle_before']['min_us']} min) over {args.passes}")
    print(f"the merging pass: CPU {f['merge']['cpu_ms']} ms ({f['merge']['cpu_us_per_row']} us per row of "
          f"{f['merge']['rows']} merged), fetched {f['merge']['fetched_mb']} MB, {f['merge']['files_after']} files after")
    print(f"idle pass after: CPU {f['idle_after']['median_us']} us median ({f['idle_after']['min_us']} min)")
    learn = f["learn"]
    print(f"tombstoneMs learnt for {learn['files']} files in {learn['passes']} passes: CPU {learn['cpu_ms']} ms "
          f"({learn['cpu_ms_per_file']} ms per file, {learn['cpu_ms_per_mb']} ms per MB fetched, "
          f"{learn['fetched_mb']} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
