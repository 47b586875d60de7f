"""Spark benchmark: ``skiff bench spark`` or ``python -m skiff.bench.spark``.

In one run, on one local Spark session (``--master``, default local[2]):

1. fills a topic of ``--queues`` queues with ``--messages`` messages of
   ``--size`` bytes (a backlog: the broker is started here, in a temporary
   store, unless ``-n`` names a running cluster);
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
this process and every process under it (the JVM, its Python workers) except
the broker, whose CPU is given apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skiff.client import Admin, AsyncProducer, Message

TOPIC = "SparkBench"
SINK_TOPIC = "SparkBenchSink"
BROKER_ARGS = ("--maxTransferCountOnMessageInMemory=1024", "--maxTransferBytesOnMessageInMemory=4194304")
FILL_BATCH = 256
FILL_IN_FLIGHT = 8


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured step: rows and seconds, wall and inside the micro-batches; CPU seconds if known."""

    step: str
    rows: int
    wall_s: float
    batches_s: float
    spark_cpu_s: float | None = None
    broker_cpu_s: float | None = None

    @property
    def wall_rate(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0

    @property
    def batches_rate(self) -> float:
        return self.rows / self.batches_s if self.batches_s else 0.0

    def us_per_row(self, cpu_s: float | None) -> str:
        return f"{cpu_s / self.rows * 1e6:.1f}" if cpu_s is not None and self.rows else "-"


class CpuMeter:
    """CPU seconds of this process tree, split into the broker's and the rest, between two marks."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        try:
            import psutil
        except ImportError:
            self._psutil = None
        else:
            self._psutil = psutil
        self._marked: dict[int, float] = {}

    def _times(self) -> dict[int, float]:
        assert self._psutil is not None
        me = self._psutil.Process()
        out = {}
        for proc in [me, *me.children(recursive=True)]:
            try:
                t = proc.cpu_times()
                out[proc.pid] = t.user + t.system + t.children_user + t.children_system
            except self._psutil.Error:
                continue
        return out

    def mark(self) -> None:
        if self._psutil is not None:
            self._marked = self._times()

    def since_mark(self) -> tuple[float | None, float | None]:
        """(Spark's CPU s, the broker's CPU s) since `mark`; None without psutil (or a broker here)."""
        if self._psutil is None:
            return None, None
        now = self._times()
        # a process that ended since the mark was reaped by its parent, whose children_* times now hold
        # all of it: subtracting every marked time (not only the living ones') counts it once
        total = sum(now.values()) - sum(self._marked.values())
        if self.broker_pid is None or self.broker_pid not in now:
            return total, None
        broker = now[self.broker_pid] - self._marked.get(self.broker_pid, 0.0)
        return total - broker, broker


async def _fill(namesrv: str, topic: str, messages: int, size: int) -> None:
    body = b"x" * size
    gate = asyncio.Semaphore(FILL_IN_FLIGHT)
    async with AsyncProducer("spark-bench-fill", namesrv) as producer:
        async def send(count: int) -> None:
            async with gate:
                await producer.send_batch([Message.of(topic, body) for _ in range(count)])

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
    return Figure(step, rows, wall, in_batches, *cpu.since_mark())


def skiff_stream(spark: Any, namesrv: str, topic: str, pull_batch_size: int) -> Any:
    return spark.readStream.format("skiff").option("namesrvAddr", namesrv).option("topic", topic) \
        .option("startingOffsets", "earliest").option("pullBatchSize", str(pull_batch_size)).load()


def measure(spark: Any, args: argparse.Namespace, namesrv: str, work: Path,
            broker_pid: int | None = None) -> list[Figure]:
    cpu = CpuMeter(broker_pid)
    figures = [fill(namesrv, TOPIC, args.queues, args.messages, args.size)]
    fill(namesrv, "SparkBenchWarmup", 2, 2000, args.size)
    run_stream("warm-up", skiff_stream(spark, namesrv, "SparkBenchWarmup", 32), work / "warmup", cpu)
    for size in args.pull_batch_size:
        figures.append(run_stream(f"skiff source, pullBatchSize {size}", skiff_stream(spark, namesrv, TOPIC, size),
                                  work / f"read-{size}", cpu))
    parquet = str(work / "parquet")
    spark.read.format("skiff").option("namesrvAddr", namesrv).option("topic", TOPIC) \
        .option("pullBatchSize", str(max(args.pull_batch_size))).load().write.parquet(parquet)
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
    figures.append(Figure("skiff sink (batch write of the bodies)", stored, elapsed, elapsed, *cpu.since_mark()))
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--namesrv", help="NameServers of a running cluster (default: start one here)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the topic (default 8)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pull-batch-size", type=int, nargs="+", default=[32, 1024],
                        help="pullBatchSize values to read with (default 32 1024)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
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
    print(f"{'step':40} {'rows':>10} {'wall s':>7} {'rows/s':>9} {'in batches':>10} "
          f"{'Spark CPU us/row':>16} {'broker CPU us/row':>17}")
    for f in figures:
        print(f"{f.step:40} {f.rows:>10,} {f.wall_s:>7.2f} {f.wall_rate:>9,.0f} {f.batches_rate:>10,.0f} "
              f"{f.us_per_row(f.spark_cpu_s):>16} {f.us_per_row(f.broker_cpu_s):>17}")


if __name__ == "__main__":
    raise SystemExit(main())
