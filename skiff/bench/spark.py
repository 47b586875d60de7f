"""Spark benchmark: ``skiff bench spark`` or ``python -m skiff.bench.spark``.

In one run, on one local Spark session (``--master``, default local[2]):

1. fills a topic of ``--queues`` queues with ``--messages`` messages of
   ``--size`` random bytes (a backlog: the broker is started here, in a temporary
   store, unless ``-n`` names a running cluster). Random, because Parquet
   stores a column of equal bodies as one dictionary entry and then reads
   nothing per row: the ceiling would not be a ceiling of the same work;
2. streaming read: ``readStream.format("skiff")`` with ``trigger(availableNow)``
   into the ``noop`` sink, once per ``--pull-batch-size`` (32 is what a broker
   with RocketMQ's defaults answers per pull; the broker started here allows
   1024 messages and 4 MiB per pull, so larger sizes can be measured);
3. the ceiling: the same rows written to Parquet, then read the same way
   (``readStream.format("parquet")`` into ``noop``);
4. sink: the Parquet rows' bodies written back with ``write.format("skiff")``.

"wall" is from ``start()`` to the end of the query (it includes about a
second of query start and stop); "in batches" counts only the micro-batches'
``addBatch`` time, what the source or sink itself costs. A small warm-up
query runs first, so JVM and Python-worker start-up are not measured. CPU per
message (with psutil) is steadier than rates on a shared machine: "Spark" is
this process and every process under it except the broker, split into the
JVM, its Python workers (where a source's ``read`` and a sink's ``write``
run) and this driver process; the broker's CPU is given apart.

Both reads do the same thing to the same rows: Spark's ``noop`` sink over the
whole schema (the Parquet copy is the skiff read written out, properties map
included), so Parquet reads and decodes every column, as the skiff source
builds every column.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skiff.client import Admin, AsyncProducer, Message
from skiff.spark.options import DEFAULT_PULL_BATCH_SIZE

TOPIC = "SparkBench"
SINK_TOPIC = "SparkBenchSink"
BROKER_ARGS = ("--maxTransferCountOnMessageInMemory=1024", "--maxTransferBytesOnMessageInMemory=4194304")
FILL_BATCH = 256
FILL_IN_FLIGHT = 8


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured step: rows and seconds, wall and inside the micro-batches; CPU seconds per
    `CpuMeter` group if known."""

    step: str
    rows: int
    wall_s: float
    batches_s: float
    cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def wall_rate(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0

    @property
    def batches_rate(self) -> float:
        return self.rows / self.batches_s if self.batches_s else 0.0

    @property
    def spark_cpu_s(self) -> float | None:
        """Everything but the broker: the driver, the JVM and its Python workers."""
        spark = [self.cpu_s[g] for g in ("driver", "jvm", "workers") if g in self.cpu_s]
        return sum(spark) if spark else None

    def us_per_row(self, group: str) -> str:
        cpu_s = self.spark_cpu_s if group == "spark" else self.cpu_s.get(group)
        return f"{cpu_s / self.rows * 1e6:.1f}" if cpu_s is not None and self.rows else "-"


class CpuMeter:
    """CPU seconds of this process tree between two marks, split four ways: the broker, the
    JVM, the JVM's Python workers, and this (driver) process with whatever else it started.

    A process's reaped children count with it (their times are in its ``children_*``); the
    JVM's reaped children are Python workers, so they count as workers, not as the JVM."""

    GROUPS = ("driver", "jvm", "workers", "broker")

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        try:
            import psutil
        except ImportError:
            self._psutil = None
        else:
            self._psutil = psutil
        self._marked: dict[str, float] = {}

    def _times(self) -> dict[str, float]:
        assert self._psutil is not None
        me = self._psutil.Process()
        procs = [me, *me.children(recursive=True)]
        jvms = {p.pid for p in procs if _name(p) == "java"}
        out = dict.fromkeys(self.GROUPS, 0.0)
        for proc in procs:
            try:
                t = proc.cpu_times()
                ancestors = {p.pid for p in proc.parents()}
            except self._psutil.Error:
                continue
            own, reaped = t.user + t.system, t.children_user + t.children_system
            if proc.pid == self.broker_pid:
                out["broker"] += own + reaped
            elif proc.pid in jvms:
                out["jvm"] += own
                out["workers"] += reaped
            elif ancestors & jvms:
                out["workers"] += own + reaped
            else:
                out["driver"] += own + reaped
        return out

    def mark(self) -> None:
        if self._psutil is not None:
            self._marked = self._times()

    def since_mark(self) -> dict[str, float]:
        """CPU seconds per group since `mark` (empty without psutil). A process that ended since
        the mark was reaped by its parent, whose ``children_*`` times now hold all of it:
        subtracting every marked time (not only the living ones') counts it once."""
        if self._psutil is None:
            return {}
        now = self._times()
        spent = {group: now[group] - self._marked.get(group, 0.0) for group in self.GROUPS}
        if self.broker_pid is None:
            del spent["broker"]
        return spent


def _name(proc: Any) -> str:
    try:
        return str(proc.name())
    except Exception:  # noqa: BLE001 - a process that just ended has no name to give
        return ""


async def _fill(namesrv: str, topic: str, messages: int, size: int) -> None:
    gate = asyncio.Semaphore(FILL_IN_FLIGHT)
    async with AsyncProducer("spark-bench-fill", namesrv) as producer:
        async def send(count: int) -> None:
            async with gate:
                await producer.send_batch([Message.of(topic, os.urandom(size)) for _ in range(count)])

        await asyncio.gather(*(send(min(FILL_BATCH, messages - i)) for i in range(0, messages, FILL_BATCH)))


def fill(namesrv: str, topic: str, queues: int, messages: int, size: int) -> Figure:
    with Admin(namesrv) as admin:
        admin.create_topic(topic, queue_nums=queues)
    started = time.monotonic()
    asyncio.run(_fill(namesrv, topic, messages, size))
    elapsed = time.monotonic() - started
    return Figure("fill (producer, batches of 256)", messages, elapsed, elapsed)


def run_stream(step: str, stream: Any, checkpoint: Path, cpu: CpuMeter) -> Figure:
    """Run ``stream`` to its end (availableNow) into the noop sink."""
    cpu.mark()
    started = time.monotonic()
    query = stream.writeStream.format("noop").option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.monotonic() - started
    if query.exception() is not None:
        raise RuntimeError(f"{step}: {query.exception()}")
    progress = query.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    in_batches = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
    return Figure(step, rows, wall, in_batches, cpu.since_mark())


def skiff_stream(spark: Any, namesrv: str, topic: str, pull_batch_size: int) -> Any:
    """The skiff source over ``topic`` from its start; ``pull_batch_size`` 0 leaves the option unset
    (the source's own default, what a user who never heard of the option gets)."""
    reader = spark.readStream.format("skiff").option("namesrvAddr", namesrv).option("topic", topic) \
        .option("startingOffsets", "earliest")
    return (reader.option("pullBatchSize", str(pull_batch_size)) if pull_batch_size else reader).load()


def batch_label(pull_batch_size: int) -> str:
    return str(pull_batch_size) if pull_batch_size else f"not set (default {DEFAULT_PULL_BATCH_SIZE})"


def measure(spark: Any, args: argparse.Namespace, namesrv: str, work: Path,
            broker_pid: int | None = None) -> list[Figure]:
    cpu = CpuMeter(broker_pid)
    figures = [fill(namesrv, TOPIC, args.queues, args.messages, args.size)]
    fill(namesrv, "SparkBenchWarmup", 2, 2000, args.size)
    run_stream("warm-up", skiff_stream(spark, namesrv, "SparkBenchWarmup", 32), work / "warmup", cpu)
    for size in args.pull_batch_size:
        figures.append(run_stream(f"skiff source, pullBatchSize {batch_label(size)}",
                                  skiff_stream(spark, namesrv, TOPIC, size),
                                  work / f"read-{size}", cpu))
    parquet = str(work / "parquet")
    spark.read.format("skiff").option("namesrvAddr", namesrv).option("topic", TOPIC) \
        .option("pullBatchSize", str(max(args.pull_batch_size) or DEFAULT_PULL_BATCH_SIZE)).load().write.parquet(parquet)
    schema = spark.read.parquet(parquet).schema
    figures.append(run_stream("parquet source (ceiling)", spark.readStream.schema(schema).parquet(parquet),
                              work / "read-parquet", cpu))
    with Admin(namesrv) as admin:
        admin.create_topic(SINK_TOPIC, queue_nums=args.queues)
    bodies = spark.read.parquet(parquet).select("body")
    cpu.mark()
    started = time.monotonic()
    bodies.write.format("skiff").mode("append").option("namesrvAddr", namesrv).option("topic", SINK_TOPIC).save()
    elapsed = time.monotonic() - started
    with Admin(namesrv) as admin:
        stored = sum(q.messages for q in admin.topic_status(SINK_TOPIC))
    figures.append(Figure("skiff sink (batch write of the bodies)", stored, elapsed, elapsed, cpu.since_mark()))
    return figures


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skiff bench spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--namesrv", metavar="HOST:PORT",
                        help=f"NameServers of a running cluster to fill and read topics {TOPIC} and {SINK_TOPIC} "
                             "on (default: start a NameServer and a broker here, in a temporary store, allowing "
                             "1024 messages and 4 MiB per pull)")
    parser.add_argument("--messages", type=int, default=1_000_000,
                        help="messages to fill the topic with, then read back in each step (default 1000000)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes, random (default 1024)")
    parser.add_argument("--queues", type=int, default=8,
                        help="queues of the topic and of the sink topic (default 8)")
    parser.add_argument("--master", default="local[2]",
                        help="Spark master URL of the local session (default local[2]: two worker threads)")
    parser.add_argument("--pull-batch-size", type=int, nargs="+", default=[32, 0], metavar="N",
                        help="pullBatchSize values to read with, one streaming read each; 0 leaves the option "
                             f"unset, the source's default ({DEFAULT_PULL_BATCH_SIZE}) (default: 32 0; 32 "
                             "is what a broker with RocketMQ's defaults answers per pull)")
    parser.add_argument("--json", action="store_true",
                        help="print the figures as one JSON list only, no table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.messages < 1 or args.size < 1 or args.queues < 1:
        parser.error("--messages, --size and --queues must be at least 1")
    from skiff.spark.local import local_session

    with tempfile.TemporaryDirectory(prefix="skiff-bench-spark-") as tmp:
        work = Path(tmp)
        spark = local_session("skiff-bench", args.master)
        try:
            if args.namesrv:
                figures = measure(spark, args, args.namesrv, work)
            else:
                from skiff.testing.processes import start_broker, start_namesrv

                with start_namesrv() as namesrv, start_broker(work / "store", namesrv.addr, *BROKER_ARGS) as broker:
                    figures = measure(spark, args, namesrv.addr, work, broker.pid)
        finally:
            spark.stop()
    _print(figures, args)
    return 0


def _print(figures: list[Figure], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps([{**asdict(f), "wall_rate": round(f.wall_rate), "batches_rate": round(f.batches_rate)}
                          for f in figures]))
        return
    print(f"\n{args.messages:,} messages of {args.size} B, {args.queues} queues, {args.master}")
    print(f"{'step':40} {'rows':>10} {'wall s':>7} {'rows/s':>9} {'in batches':>10}   CPU us/row: "
          f"{'Spark':>5} {'JVM':>5} {'Py workers':>10} {'driver':>6} {'broker':>6}")
    for f in figures:
        print(f"{f.step:40} {f.rows:>10,} {f.wall_s:>7.2f} {f.wall_rate:>9,.0f} {f.batches_rate:>10,.0f}   "
              f"{'':11}{f.us_per_row('spark'):>5} {f.us_per_row('jvm'):>5} {f.us_per_row('workers'):>10} "
              f"{f.us_per_row('driver'):>6} {f.us_per_row('broker'):>6}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")

if __name__ == "__main__":
    raise SystemExit(main())
