"""Compaction benchmark: ``skiff bench compaction`` or ``python -m skiff.bench.compaction``.

On a fresh store it writes ``--messages`` keyed messages (``--keys`` distinct keys,
chosen at random, ``--size``-byte bodies) to one queue, fsyncs them, then measures:

- one compaction of the whole queue with a map large enough for every key: MB of
  log cleaned per second of wall time and per CPU-second, records per second;
- the same log compacted with a map of a quarter of the keys (multi-pass);
- the offset map's memory per key: the peak that Python's allocator reports
  (tracemalloc) while the map pass over the log runs, divided by the keys.

``--quick`` runs a small case (a smoke test); ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from skiff.common.config import build_config
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.store import MessageInput, MessageStore, StoreConfig
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY

TOPIC = "BenchCompacted"
BATCH = 256
STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("127.0.0.1", 50000)


@dataclass(frozen=True, slots=True)
class RunFigures:
    passes: int
    records_read: int
    records_kept: int
    mb_read: float
    mb_written: float
    wall_s: float
    cpu_s: float
    mb_per_s: float
    mb_per_cpu_s: float
    records_per_s: float


@dataclass(frozen=True, slots=True)
class Figures:
    messages: int
    keys: int
    body_bytes: int
    log_mb: float
    full_map: RunFigures
    quarter_map: RunFigures
    map_peak_bytes: int
    map_bytes_per_key: float


def _write(store: MessageStore, messages: int, keys: int, size: int, seed: int) -> None:
    rng = random.Random(seed)
    body = b"x" * size
    for start in range(0, messages, BATCH):
        batch = []
        for _ in range(min(BATCH, messages - start)):
            key = f"key-{rng.randrange(keys)}"
            batch.append(MessageInput(topic=TOPIC, queue_id=0, body=body,
                                      properties=encode_properties({Prop.KEYS: key}), flag=0, sys_flag=0,
                                      born_timestamp=0, born_host=BORN_HOST, keys=key))
        result = store.put_messages(batch)
        if not result.ok:
            raise RuntimeError(f"append failed: {result.status.name} {result.reason}")
    store.flush()


def _run(store: MessageStore, map_entries: int) -> RunFigures:
    wall, cpu = time.perf_counter(), time.process_time()
    r = store.compact(TOPIC, 0, delete_retention_ms=86_400_000,
                      max_offset_map_size=map_entries * OFFSET_MAP_BYTES_PER_ENTRY)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    mb_read = r.bytes_read / 1e6
    return RunFigures(r.passes, r.records_read, r.records_kept, round(mb_read, 2), round(r.bytes_written / 1e6, 3),
                      round(wall, 3), round(cpu, 3), round(mb_read / wall, 2), round(mb_read / max(cpu, 1e-9), 2),
                      round(r.records_read / wall))


def _map_peak(store: MessageStore, keys: int) -> int:
    """Peak bytes allocated while the map pass over the whole (still dirty) log runs."""
    cq = store.queues.get(TOPIC, 0)
    assert cq is not None
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        omap, _ = store.compaction._build_map(cq, cq.min_offset, cq.max_offset, keys * 2)  # noqa: SLF001
        peak = tracemalloc.get_traced_memory()[1] - base
        del omap
    finally:
        tracemalloc.stop()
    return peak


def _store(root: str) -> MessageStore:
    config = build_config(StoreConfig, {
        "storePathRootDir": root, "mappedFileSizeCommitLog": 256 << 20, "maxHashSlotNum": 1 << 16,
        "maxIndexNum": 1 << 20, "messageIndexEnable": "false", "diskMaxUsedSpaceRatio": 100,
        "diskSpaceCleanForciblyRatio": 100, "diskSpaceWarningLevelRatio": 100,
    })
    store = MessageStore(config, store_host=STORE_HOST)
    store.start()
    return store


def measure(messages: int, keys: int, size: int, directory: str | None = None, seed: int = 1) -> Figures:
    root = tempfile.mkdtemp(prefix="skiff-bench-compaction-", dir=directory)
    try:
        runs: list[RunFigures] = []
        for map_entries in (keys * 2, max(1, keys // 4)):
            store = _store(f"{root}/{map_entries}")
            try:
                _write(store, messages, keys, size, seed)
                if not runs:
                    peak = _map_peak(store, keys)
                log_mb = store.max_physical_offset / 1e6
                runs.append(_run(store, map_entries))
            finally:
                store.shutdown()
        return Figures(messages, keys, size, round(log_mb, 2), runs[0], runs[1], peak, round(peak / keys, 1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench compaction", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500_000, help="messages written (default 500,000)")
    parser.add_argument("--keys", type=int, default=50_000, help="distinct keys (default 50,000)")
    parser.add_argument("--size", type=int, default=200, help="body bytes (default 200)")
    parser.add_argument("--dir", help="where the temporary stores go (default: the system's temp directory)")
    parser.add_argument("--quick", action="store_true", help="a small case: 4,000 messages, 500 keys")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.keys = 4_000, 500
    if args.messages <= 0 or args.keys <= 0 or args.size < 0:
        parser.error("--messages and --keys must be positive, --size not negative")
    figures = measure(args.messages, args.keys, args.size, args.dir)
    if args.json:
        json.dump(asdict(figures), sys.stdout)
        print()
        return 0
    print(f"{figures.messages} messages of {figures.body_bytes} B over {figures.keys} keys: "
          f"{figures.log_mb} MB of log")
    for name, run in (("map for every key", figures.full_map), ("map for 1/4 of the keys", figures.quarter_map)):
        print(f"  {name}: {run.passes} pass(es), kept {run.records_kept} of {run.records_read}, "
              f"{run.mb_per_s} MB/s cleaned ({run.mb_per_cpu_s} MB per CPU-second), {run.records_per_s} records/s")
    print(f"  offset map: peak {figures.map_peak_bytes} B allocated, {figures.map_bytes_per_key} B per key")
    return 0


if __name__ == "__main__":
    sys.exit(main())
