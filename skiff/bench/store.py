"""Store benchmark: ``skiff bench store`` or ``python -m skiff.bench.store``.

On one directory it measures:

- the ceiling: dd-style sequential writes (1 MiB blocks, then fdatasync) of a
  plain file, the most the disk takes;
- appends of 100 B and 1 KiB bodies, one by one and in batches of 32, with
  ASYNC_FLUSH and SYNC_FLUSH, from 1 and from 16 writer threads. Messages carry
  what a producer's do (UNIQ_KEY, TAGS, WAIT), so the index works too. ASYNC
  timings include the final fsync, so their MB/s compare with the ceiling;
- reads: a backlog of 1,000,000 messages of 100 B in one queue, pulled 32 at a
  time as raw slices (no decoding).

``--quick`` runs every case briefly on small files (a smoke test); ``--json``
prints the figures as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from skiff.common.config import build_config
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import pack_host
from skiff.store import FlushDiskType, MessageInput, MessageStore, StoreConfig

TOPIC = "BenchTopic"
BATCH = 32
POOL = 1024
STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("127.0.0.1", 50000)


@dataclass(frozen=True, slots=True)
class Plan:
    seconds: float
    ceiling_bytes: int
    backlog: int
    file_bytes: int
    index_slots: int
    index_entries: int


FULL = Plan(seconds=2.0, ceiling_bytes=1 << 30, backlog=1_000_000, file_bytes=1 << 30,
            index_slots=5_000_000, index_entries=20_000_000)
QUICK = Plan(seconds=0.1, ceiling_bytes=16 << 20, backlog=20_000, file_bytes=16 << 20,
             index_slots=4096, index_entries=200_000)


@dataclass(frozen=True, slots=True)
class AppendFigures:
    body_bytes: int
    batch: int
    flush: str
    writers: int
    messages: int
    seconds: float
    msg_per_s: float
    mb_per_s: float
    fsyncs: int
    ceiling_ratio: float
    cpu_seconds: float
    """CPU time of the whole process (all threads): on a busy machine, msg/CPU-s is steadier than msg/s."""


@dataclass(frozen=True, slots=True)
class ReadFigures:
    messages: int
    seconds: float
    msg_per_s: float
    mb_per_s: float
    cpu_seconds: float


def ceiling_mb_per_s(directory: str, total_bytes: int) -> float:
    """Sequential write bandwidth of ``directory`` in MB/s, as ``dd bs=1M conv=fdatasync``."""
    path = os.path.join(directory, "ceiling.dd")
    block = b"\xa5" * (1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        began = time.perf_counter()
        for _ in range(total_bytes // len(block)):
            os.write(fd, block)
        os.fdatasync(fd)
        elapsed = time.perf_counter() - began
    finally:
        os.close(fd)
        os.unlink(path)
    return total_bytes / elapsed / 1e6


def make_messages(body_bytes: int, queue_id: int, count: int = POOL) -> list[MessageInput]:
    """Messages as a producer sends them: a unique UNIQ_KEY each, TAGS and WAIT."""
    out = []
    for i in range(count):
        uniq = f"7F000001{os.getpid() & 0xFFFF:04X}{queue_id:08X}{i:012X}"
        props = encode_properties({Prop.UNIQ_KEY: uniq, Prop.WAIT: "true", Prop.TAGS: "TagA"})
        out.append(MessageInput(topic=TOPIC, queue_id=queue_id, body=os.urandom(body_bytes), properties=props, flag=0,
                                sys_flag=0, born_timestamp=int(time.time() * 1000), born_host=BORN_HOST, tags="TagA",
                                uniq_key=uniq))
    return out


def _config(root: str, plan: Plan, flush: FlushDiskType) -> StoreConfig:
    return build_config(StoreConfig, {
        "storePathRootDir": root, "mappedFileSizeCommitLog": plan.file_bytes, "flushDiskType": flush.name,
        "maxHashSlotNum": plan.index_slots, "maxIndexNum": plan.index_entries,
        "diskMaxUsedSpaceRatio": 100, "diskSpaceCleanForciblyRatio": 100, "diskSpaceWarningLevelRatio": 100,
    })


def _writer(store: MessageStore, pool: list[MessageInput], batch: int, deadline: float, counts: list[int]) -> None:
    n = 0
    i = 0
    sync = store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    # At least one append per writer: on a loaded machine a thread can first run after a short
    # (--quick, 0.1 s) deadline, and a case of no messages measures nothing.
    while True:
        if batch == 1:
            result = store.put_message(pool[i])
        else:
            result = store.put_messages(pool[i : i + batch])
        if not result.ok:
            raise RuntimeError(f"append failed: {result.status.name} {result.reason}")
        if sync:
            result.flushed.result()  # type: ignore[union-attr]
        n += batch
        i = (i + batch) % len(pool)
        if time.perf_counter() >= deadline:
            break
    counts.append(n)


def run_appends(root: str, plan: Plan, body_bytes: int, batch: int, flush: FlushDiskType, writers: int,
                ceiling: float) -> AppendFigures:
    store = MessageStore(_config(root, plan, flush), store_host=STORE_HOST)
    store.start()
    try:
        pools = [make_messages(body_bytes, w % 8) for w in range(writers)]
        counts: list[int] = []
        cpu = time.process_time()
        began = time.perf_counter()
        deadline = began + plan.seconds
        threads = [threading.Thread(target=_writer, args=(store, pools[w], batch, deadline, counts))
                   for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        store.flush()
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu
        stats = store.stats()
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    if len(counts) != writers:
        raise RuntimeError("a writer thread failed")
    mb = stats.put_bytes / elapsed / 1e6
    return AppendFigures(body_bytes, batch, flush.name, writers, sum(counts), elapsed, sum(counts) / elapsed, mb,
                         stats.fsync_count, mb / ceiling, cpu)


def run_reads(root: str, plan: Plan) -> ReadFigures:
    store = MessageStore(_config(root, plan, FlushDiskType.ASYNC_FLUSH), store_host=STORE_HOST)
    store.start()
    try:
        pool = make_messages(100, 0)
        for i in range(0, plan.backlog, BATCH):
            store.put_messages(pool[i % POOL : i % POOL + min(BATCH, plan.backlog - i)])
        store.flush()
        offset, messages, total = 0, 0, 0
        cpu = time.process_time()
        began = time.perf_counter()
        end = store.get_max_offset(TOPIC, 0)
        while offset < end:
            result = store.get_messages(TOPIC, 0, offset, BATCH)
            messages += result.message_count
            total += result.total_bytes
            offset = result.next_begin_offset
        elapsed = time.perf_counter() - began
        cpu = time.process_time() - cpu
    finally:
        store.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return ReadFigures(messages, elapsed, messages / elapsed, total / elapsed / 1e6, cpu)


def run(directory: str, plan: Plan, progress: bool = True) -> dict:
    ceiling = ceiling_mb_per_s(directory, plan.ceiling_bytes)
    appends = []
    for body in (100, 1024):
        for batch in (1, BATCH):
            for flush in FlushDiskType:
                for writers in (1, 16):
                    fig = run_appends(os.path.join(directory, "appends"), plan, body, batch, flush, writers, ceiling)
                    appends.append(fig)
                    if progress:
                        print(_append_row(fig), file=sys.stderr, flush=True)
    reads = run_reads(os.path.join(directory, "reads"), plan)
    return {"ceiling_mb_per_s": ceiling, "appends": [asdict(a) for a in appends], "reads": asdict(reads)}


def _append_row(a: AppendFigures) -> str:
    return (f"{a.body_bytes:>5} B  batch {a.batch:>2}  {a.flush:<11} {a.writers:>2} writer(s)  "
            f"{a.msg_per_s:>10,.0f} msg/s  {a.mb_per_s:>7.1f} MB/s  {a.ceiling_ratio:>5.0%} of ceiling  "
            f"{a.messages / a.cpu_seconds:>10,.0f} msg/CPU-s  fsyncs {a.fsyncs}")


def report(figures: dict) -> str:
    r = figures["reads"]
    lines = [f"ceiling (dd-style sequential write): {figures['ceiling_mb_per_s']:.1f} MB/s"]
    lines += [_append_row(AppendFigures(**a)) for a in figures["appends"]]
    lines.append(f"reads: {r['messages']:,} messages  {r['msg_per_s']:,.0f} msg/s  {r['mb_per_s']:.1f} MB/s  "
                 f"{r['messages'] / r['cpu_seconds']:,.0f} msg/CPU-s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench store", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="directory to measure (default: a new temporary directory)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a short smoke run on small files")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    parent = args.dir or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    directory = tempfile.mkdtemp(prefix="skiff-bench-store-", dir=parent)
    try:
        figures = run(directory, plan, progress=not args.json)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    figures["quick"] = args.quick
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
