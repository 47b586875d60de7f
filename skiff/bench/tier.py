"""Tiered storage benchmark: ``skiff bench tier`` or ``python -m skiff.bench.tier``.

One broker (started here, temporary store, 4 MiB CommitLog files) whose tier is a
directory on the same disk (``file://``), one tiered topic of ``--queues`` queues filled
with ``--messages`` messages of ``--size`` random bytes (random: zstd would shrink equal
bodies to nothing). Then:

1. upload: one uploader pass over the whole backlog (TIER_UPLOAD_NOW, timed at the
   client), as MB/s of stored record bytes, with the broker's CPU seconds per uploaded MB
   (psutil); beside it the disk's ceiling: the same bytes written to a file of the same
   directory and fsynced;
2. Spark (``--spark``): a batch read of the topic into the ``noop`` sink through the
   broker, then with ``tierUrl`` (every offset in the tier: the executors read the
   Parquet files), then the tier's files with ``spark.read.parquet`` (the ceiling: the
   same twelve columns, read by the JVM alone), each after a warm-up read, best of
   ``--repeat`` (the kinds in turn, each repeat), with the CPU of that best run per row (the JVM, its Python workers, the
   broker) and the ratios to the read through the broker; ``--read-steps``: the CPU per row
   of each step of the tier read without Spark (`skiff.bench.tier_steps`);
3. first read of a tiered offset: the topic's ``retention.local.ms`` set to 0, retention
   deletes its local files, and a pull of offset 0 is timed until it returns messages
   (the broker fetches the file on a worker thread and answers "retry" meanwhile); then
   the same pull again (the file cached) and a pull of the newest local offset;
4. Kafka (``--kafka``): once retention has deleted at least half of the last queue locally,
   librdkafka's consumer, at its defaults, reads that queue (no pull touched it) from offset 0
   up to its local minimum, every message from the tier (each row group fetched or rebuilt
   while the fetch waits), timed as messages/s.

Figures are wall-clock on whatever else the machine runs: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skiff.bench.spark import CpuMeter, fill
from skiff.client import Admin, MessageQueue, PullClient, PullStatus
from skiff.columnar.schema import SOURCE_COLUMNS
from skiff.testing.processes import free_port, run_skiff, start_broker, start_namesrv
from skiff.testing.waits import wait_for

TOPIC = "TierBench"
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
_MB = 1_000_000


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="skiff bench tier", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000, help="messages in the backlog (default 100000)")
    p.add_argument("--size", type=int, default=1024, help="body bytes per message (default 1024)")
    p.add_argument("--queues", type=int, default=4, help="queues of the topic (default 4)")
    p.add_argument("--spark", action="store_true", help="also time Spark reads: broker, tier, plain Parquet")
    p.add_argument("--repeat", type=int, default=3, help="Spark reads per kind, best kept (default 3)")
    p.add_argument("--read-steps", action="store_true",
                   help="also the CPU per row of each step of the Spark source's tier read, without Spark")
    p.add_argument("--kafka", action="store_true",
                   help="also time a Kafka consumer reading a queue's tiered offsets through the broker")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def disk_ceiling(directory: Path, size_bytes: int) -> float:
    """MB/s of writing ``size_bytes`` to a new file in ``directory`` and fsyncing it."""
    block = os.urandom(1 << 20)
    path = directory / "ceiling.bin"
    started = time.monotonic()
    with open(path, "wb") as f:
        for _ in range(0, size_bytes, len(block)):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.monotonic() - started
    path.unlink()
    return size_bytes / _MB / elapsed


def upload(ns: str, broker_pid: int) -> dict[str, Any]:
    cpu = CpuMeter(broker_pid)
    cpu.mark()
    started = time.monotonic()
    with Admin(ns) as admin:
        (b,) = admin.tier(TOPIC, upload=True, timeout_ms=3_600_000)
    elapsed = time.monotonic() - started
    assert b.state is not None, b.error
    broker_cpu = cpu.since_mark().get("broker")
    local = sum(q.local_bytes for q in b.state.queues)
    remote = sum(q.remote_bytes for q in b.state.queues)
    return {"seconds": elapsed, "record_mb": local / _MB, "parquet_mb": remote / _MB,
            "record_mb_per_s": local / _MB / elapsed,
            "broker_cpu_s_per_mb": None if broker_cpu is None else broker_cpu / (local / _MB),
            "rows": sum(q.remote_rows for q in b.state.queues)}


def spark_reads(ns: str, tier: Path, repeat: int, rows: int, broker_pid: int | None = None) -> dict[str, Any]:
    """Each read's best wall time of ``repeat`` (after a warm-up) and the CPU seconds of that
    run, split into the JVM, its Python workers and the broker (steadier than wall time on a
    shared machine)."""
    from skiff.bench.tier_floor import FloorSource
    from skiff.spark.local import local_session

    spark = local_session("skiff-bench-tier")
    spark.dataSource.register(FloorSource)
    first_file = str(min(tier.glob(f"{TOPIC}/*/*/*.parquet")))
    cpu = CpuMeter(broker_pid)
    try:
        def skiff_read(**options: str) -> Any:
            return spark.read.format("skiff").option("namesrvAddr", ns).option("topic", TOPIC).options(**options).load()

        kinds = {
            "through the broker": lambda: skiff_read(),
            "from the tier (tierUrl)": lambda: skiff_read(tierUrl=f"file://{tier}"),
            "spark.read.parquet (ceiling)": lambda: spark.read.option("recursiveFileLookup", "true")
            .option("pathGlobFilter", "*.parquet").parquet(str(tier / TOPIC)).select(*SOURCE_COLUMNS),
            "a Python source of prebuilt batches (floor)": lambda: spark.read.format(FloorSource.name())
            .option("rows", str(rows)).option("partitions", "4").option("file", first_file).load(),
        }
        for df in kinds.values():
            df().write.format("noop").mode("overwrite").save()  # warm-up
        best: dict[str, tuple[float, dict[str, Any]]] = {name: (float("inf"), {}) for name in kinds}
        for _ in range(repeat):  # the kinds in turn, so that a change of the machine's load hits them alike
            for name, df in kinds.items():
                cpu.mark()
                started = time.monotonic()
                df().write.format("noop").mode("overwrite").save()
                elapsed = time.monotonic() - started
                if elapsed < best[name][0]:
                    best[name] = (elapsed, cpu.since_mark())
        return {name: {"rows": df().count(), "seconds": best[name][0], "cpu_s": best[name][1]}
                for name, df in kinds.items()}
    finally:
        spark.stop()


def _timed_pull(client: PullClient, mq: MessageQueue, offset: int) -> tuple[float, int]:
    """Seconds until a pull of ``offset`` returns messages, and how many pulls it took."""
    started, pulls = time.monotonic(), 0
    while True:
        pulls += 1
        result = client.pull(mq, offset, 32)
        if result.status is PullStatus.FOUND:
            assert result.messages[0].queue_offset == offset, result.messages[0].queue_offset
            return time.monotonic() - started, pulls
        assert time.monotonic() - started < 60, f"offset {offset} never came back: {result.status}"


def first_read(ns: str, queues: int) -> dict[str, Any]:
    done = run_skiff(["topic", "update", "-t", TOPIC, "-q", str(queues), "-n", ns, "--attr", "retention.local.ms=0"])
    assert done.returncode == 0, done.stdout
    mq = MessageQueue(TOPIC, "broker-a", 0)
    with Admin(ns) as admin:
        low = wait_for(lambda: admin.tier(TOPIC)[0].state.queues[0].local_min_offset, 120,
                       "retention to delete the uploaded files")
        newest = admin.max_offset(mq) - 1
    with PullClient(ns) as client:
        first, pulls = _timed_pull(client, mq, 0)
        cached, _ = _timed_pull(client, mq, 0)
        local, _ = _timed_pull(client, mq, newest)
    return {"local_min_offset": low, "first_ms": first * 1000, "first_pulls": pulls, "cached_ms": cached * 1000,
            "local_ms": local * 1000}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    tier = work / "tier"
    broker_args = [f"--tierStorageUrl=file://{tier}", "--tierSealMs=1", "--tierUploadIntervalMs=3600000",
                   "--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}", "--cleanResourceInterval=200",
                   "--maxTransferCountOnMessageInMemory=1024", "--maxTransferBytesOnMessageInMemory=4194304"]
    broker_args += ["--mappedFileSizeCommitLog=4194304", "--flushIntervalCommitLog=50"]  # after the defaults: wins
    kafka_port = free_port() if args.kafka else 0
    if kafka_port:
        broker_args.append(f"--kafkaListenPort={kafka_port}")
    with start_namesrv() as ns_proc, start_broker(work / "store", ns_proc.addr, *broker_args) as broker:
        ns = ns_proc.addr
        # tiered before the fill, so retention (which deletes at once here) holds every message
        done = run_skiff(["topic", "create", "-t", TOPIC, "-q", str(args.queues), "-n", ns,
                          "--attr", "tiered.storage=true", "--attr", "retention.local.ms=3600000"])
        assert done.returncode == 0, done.stdout
        filled = fill(ns, TOPIC, args.queues, args.messages, args.size)  # its create keeps the attributes
        figures: dict[str, Any] = {"messages": args.messages, "size": args.size, "queues": args.queues,
                                   "fill_s": filled.wall_s}
        figures["upload"] = upload(ns, broker.popen.pid)
        figures["disk_ceiling_mb_per_s"] = disk_ceiling(work, int(figures["upload"]["record_mb"] * _MB))
        if args.read_steps:
            from skiff.bench.tier_steps import read_steps
            figures["read_steps"] = read_steps(str(tier), TOPIC)
        if args.spark:
            figures["spark"] = spark_reads(ns, tier, args.repeat, args.messages, broker.popen.pid)
        figures["first_read"] = first_read(ns, args.queues)
        if kafka_port:
            figures["kafka_read"] = kafka_read(ns, f"127.0.0.1:{kafka_port}", args.queues)
    return figures


def kafka_read(ns: str, bootstrap: str, queues: int) -> dict[str, Any]:
    """A Kafka consumer's read of the last queue from offset 0 up to its local minimum: offsets only
    the tier holds (retention deleted them locally in `first_read`), none read before."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from skiff.bench.kafka import consumer_config

    queue = queues - 1
    with Admin(ns) as admin:
        mq = MessageQueue(TOPIC, "broker-a", queue)
        half = admin.max_offset(mq) // 2

        def local_min() -> int | None:
            (state,) = [b.state for b in admin.tier(TOPIC)]
            assert state is not None
            low = next(q.local_min_offset for q in state.queues if q.queue_id == queue)
            return low if low >= half else None

        end: int = wait_for(local_min, 120, "retention to delete half the queue's local messages") or 0
    consumer = Consumer(consumer_config(bootstrap, "bench-tier-kafka"))
    consumer.assign([TopicPartition(TOPIC, queue, 0)])
    started, got, expected = time.monotonic(), 0, 0
    try:
        while expected < end:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                assert msg.offset() == expected, (msg.offset(), expected)
                expected += 1
                got += 1
            assert time.monotonic() - started < 300, f"the Kafka read stopped at offset {expected} of {end}"
    finally:
        consumer.close()
    seconds = time.monotonic() - started
    return {"messages": got, "seconds": seconds, "per_s": got / seconds}


def report(f: dict[str, Any]) -> None:
    u = f["upload"]
    print(f"backlog: {f['messages']} messages of {f['size']} B on {f['queues']} queues")
    cpu = "-" if u["broker_cpu_s_per_mb"] is None else f"{u['broker_cpu_s_per_mb'] * 1000:.1f} ms"
    print(f"upload: {u['record_mb']:.1f} MB of records in {u['seconds']:.2f} s = {u['record_mb_per_s']:.1f} MB/s "
          f"({u['parquet_mb']:.1f} MB of Parquet); broker CPU per MB {cpu}; "
          f"disk ceiling (write + fsync) {f['disk_ceiling_mb_per_s']:.0f} MB/s")
    if "read_steps" in f:
        from skiff.bench.tier_steps import report as report_steps
        report_steps(f["read_steps"])
    reads = f.get("spark", {})
    for name, s in reads.items():
        per_row = " ".join(f"{k} {v * 1e6 / s['rows']:.2f}" for k, v in s["cpu_s"].items()
                           if v is not None and k != "driver")
        print(f"spark {name}: {s['rows']} rows in {s['seconds']:.2f} s = {s['rows'] / s['seconds']:,.0f} rows/s; "
              f"CPU us per row: {per_row}")
    if reads:
        rate = {name: s["rows"] / s["seconds"] for name, s in reads.items()}
        print("spark rows/s, against the read through the broker: " + ", ".join(
            f"{name} {r / rate['through the broker']:.2f}x" for name, r in rate.items() if name != "through the broker"))
    r = f["first_read"]
    print(f"pull of offset 0 (local minimum now {r['local_min_offset']}): first {r['first_ms']:.1f} ms "
          f"({r['first_pulls']} pulls), cached {r['cached_ms']:.1f} ms; a local offset {r['local_ms']:.1f} ms")
    if "kafka_read" in f:
        k = f["kafka_read"]
        print(f"kafka read of tiered offsets: {k['messages']} messages in {k['seconds']:.2f} s = {k['per_s']:,.0f}/s")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-tier-") as tmp:
        figures = run(args, Path(tmp))
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
