"""What a compacted topic's uploads cost once they supersede keys of older tiered files:
``python -m skiff.bench.tier_compacted``.

In this process: a store (`skiff.bench.compaction`'s), one compacted tiered queue and the
broker's uploader over a filesystem tier in a temporary directory. Each of ``--rounds`` rounds
writes ``--messages`` messages with keys drawn at random from ``--keys``, compacts the queue and
runs one upload pass, timed (wall and this process's CPU), with the part of it spent finding,
rewriting and merging older files that hold a key the new file holds (`Tier.superseded`,
`Tier.rewrite`). Reported per round: rows and MB of records uploaded, tiered files, files
rewritten, merged or dropped, CPU ms per uploaded MB (all of the pass, and the rewrites' part).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from skiff.bench.compaction import TOPIC, _store, _write
from skiff.broker.config import BrokerConfig
from skiff.broker.tier.uploader import TierUploader
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import SYSTEM_CLOCK
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY
from skiff.tier.backends import FilesystemBackend
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier

_MB = 1_000_000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m skiff.bench.tier_compacted", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=8, help="write, compact, upload rounds (default 8)")
    p.add_argument("--messages", type=int, default=20_000, help="messages per round (default 20000)")
    p.add_argument("--keys", type=int, default=50_000, help="distinct keys, drawn at random (default 50000)")
    p.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


class _TimedTier(Tier):
    """A tier that adds up the CPU seconds of finding the older files holding a key the new file
    holds (`Tier.superseded`) and of rewriting and merging them (`Tier.rewrite`), and the files
    those replaced."""

    cpu_s = 0.0
    replaced = 0

    def superseded(self, manifest: Manifest, newer: Segment, table: pa.Table) -> dict[Segment, pa.Table]:
        started = time.process_time()
        try:
            return super().superseded(manifest, newer, table)
        finally:
            self.cpu_s += time.process_time() - started

    def rewrite(self, manifest: Manifest, kept: Mapping[Segment, pa.Table],
                queue_ids: Iterable[int]) -> dict[Segment, Segment | None]:
        started = time.process_time()
        try:
            out = super().rewrite(manifest, kept, queue_ids)
            self.replaced += len(out)
            return out
        finally:
            self.cpu_s += time.process_time() - started


def run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    store = _store(str(work / "store"))
    try:
        topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(work), SYSTEM_CLOCK,
                                    schedule_queue_nums=2)
        topics.put(TopicConfig(TOPIC, 1, 1, attributes={"cleanup.policy": "COMPACTION", "tiered.storage": "true",
                                                        "retention.local.ms": str(365 * 86_400_000)}))
        timed = _TimedTier(FilesystemBackend(str(work / "tier")))
        uploader = TierUploader(store, topics, timed, "broker-a", 0, SYSTEM_CLOCK)
        rounds = []
        for r in range(args.rounds):
            _write(store, args.messages, args.keys, args.size, seed=r + 1)
            store.compact(TOPIC, 0, delete_retention_ms=86_400_000,
                          max_offset_map_size=2 * args.keys * OFFSET_MAP_BYTES_PER_ENTRY)
            timed.cpu_s, timed.replaced = 0.0, 0
            wall, cpu = time.perf_counter(), time.process_time()
            done = uploader.run()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            mb = done.record_bytes / _MB
            rounds.append({"round": r, "rows": done.rows, "record_mb": round(mb, 3),
                           "files": len(uploader.manifest(TOPIC).segments), "replaced": timed.replaced,
                           "tier_mb": round(uploader.manifest(TOPIC).remote_bytes() / _MB, 3),
                           "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "rewrite_cpu_s": round(timed.cpu_s, 3),
                           "cpu_ms_per_mb": round(cpu * 1000 / mb, 1) if mb else None,
                           "rewrite_cpu_ms_per_mb": round(timed.cpu_s * 1000 / mb, 1) if mb else None})
        return rounds
    finally:
        store.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-tier-compacted-") as tmp:
        rounds = run(args, Path(tmp))
    if args.json:
        print(json.dumps(rounds, indent=2))
        return 0
    print(f"{args.rounds} rounds of {args.messages} messages of {args.size} B, keys drawn from {args.keys}")
    for f in rounds:
        print(f"round {f['round']}: {f['rows']} rows ({f['record_mb']} MB of records) uploaded; {f['files']} files "
              f"({f['tier_mb']} MB), {f['replaced']} rewritten, merged or dropped; CPU {f['cpu_s']} s "
              f"({f['cpu_ms_per_mb']} ms per MB), of it the rewrites {f['rewrite_cpu_s']} s "
              f"({f['rewrite_cpu_ms_per_mb']} ms per MB); wall {f['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
