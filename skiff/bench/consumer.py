"""Consumer benchmark: ``skiff bench consumer`` or ``python -m skiff.bench.consumer``.

Pre-fills a topic with ``--messages`` messages of ``--size`` bytes (batched
sends), then starts a push consumer of a new group from the first offset and
measures how fast it drains that backlog. Prints RocketMQ's consumer benchmark
fields each ``--report-s`` seconds and at the end — Consume TPS, Average and
Max born-to-consume (B2C) and store-to-consume (S2C) latency — plus their p50
and p99 and the CPU time per message of the client (and of the broker when
the bench started it). On a backlog the latencies are the backlog's age; `skiff
bench e2e` measures them under a steady send rate.

The listener is an ``async def`` (``--listener async``, the default) or a plain
function run on the consumer's thread pool (``--listener sync``); each call
gets up to ``--batch`` messages. With ``--lite`` an `AsyncLitePullConsumer`
drains it instead, ``poll`` returning the batches of its pulls of ``--pull-batch``
(the consumer `skiff bench compare` drives for Skiff). Without ``-n`` the bench
starts a NameServer and a broker of its own on 127.0.0.1 (child processes, a
temporary store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from skiff.bench.producer import _ProcessCpu, percentile
from skiff.client.admin import AsyncAdmin
from skiff.client.lite_pull_consumer import AsyncLitePullConsumer
from skiff.client.producer import AsyncProducer
from skiff.client.push_consumer import AsyncPushConsumer
from skiff.client.results import ConsumeOrderlyStatus, ConsumeStatus
from skiff.common.message import Message
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.transport.loop import run_coroutine

TOPIC = "BenchmarkConsume"
QUEUES = 8
PREFILL_BATCH = 64
PREFILL_IN_FLIGHT = 8
LITE_POLL_MS = 1000


@dataclass(slots=True)
class Latencies:
    """Messages consumed and their born-to-consume and store-to-consume latencies (ms)."""

    count: int = 0
    b2c_ms: list[int] = field(default_factory=list)
    s2c_ms: list[int] = field(default_factory=list)

    def add(self, msgs: Sequence[StoredMessage]) -> None:
        now = int(time.time() * 1000)
        self.count += len(msgs)
        self.b2c_ms += [now - m.born_timestamp for m in msgs]
        self.s2c_ms += [now - m.store_timestamp for m in msgs]

    def since(self, index: int) -> Latencies:
        """The messages recorded after the first ``index`` (a report window)."""
        return Latencies(self.count - index, self.b2c_ms[index:], self.s2c_ms[index:])


@dataclass(frozen=True, slots=True)
class ConsumeFigures:
    seconds: float
    messages: int
    consume_tps: float
    average_b2c_ms: float
    average_s2c_ms: float
    max_b2c_ms: int
    max_s2c_ms: int
    p50_b2c_ms: float
    p99_b2c_ms: float
    p50_s2c_ms: float
    p99_s2c_ms: float
    client_cpu_us_per_msg: float
    broker_cpu_us_per_msg: float | None
    size_bytes: int
    batch: int
    listener: str


def figures(lat: Latencies, seconds: float, client_cpu_s: float, broker_cpu_s: float | None,
            args: argparse.Namespace) -> ConsumeFigures:
    n = lat.count
    b2c, s2c = lat.b2c_ms, lat.s2c_ms
    return ConsumeFigures(
        round(seconds, 3), n, round(n / seconds, 1) if seconds > 0 else 0.0,
        round(statistics.fmean(b2c), 3) if b2c else 0.0, round(statistics.fmean(s2c), 3) if s2c else 0.0,
        max(b2c, default=0), max(s2c, default=0), percentile(b2c, 0.5), percentile(b2c, 0.99),
        percentile(s2c, 0.5), percentile(s2c, 0.99), round(client_cpu_s / n * 1e6, 2) if n else 0.0,
        round(broker_cpu_s / n * 1e6, 2) if n and broker_cpu_s is not None else None,
        args.size, *((args.pull_batch, "lite") if getattr(args, "lite", False) else (args.batch, args.listener)),
    )


def line(tps: float, lat: Latencies) -> str:
    """One progress line in RocketMQ's Consumer benchmark wording."""
    b2c, s2c = lat.b2c_ms, lat.s2c_ms
    return (f"Consume TPS: {tps:,.0f} Average(B2C) RT(ms): {statistics.fmean(b2c) if b2c else 0:.3f} "
            f"Average(S2C) RT(ms): {statistics.fmean(s2c) if s2c else 0:.3f} MAX(B2C) RT(ms): {max(b2c, default=0)} "
            f"MAX(S2C) RT(ms): {max(s2c, default=0)}")


def make_listener(kind: str, on_batch: Callable[[Sequence[StoredMessage]], None],
                  orderly: bool = False) -> Callable[..., Any]:
    """The benchmark's listener: records the batch and succeeds, on the loop or on the pool."""
    ok: Any = ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeStatus.CONSUME_SUCCESS
    if kind == "async":
        async def listen_async(msgs: list[StoredMessage], ctx: Any) -> Any:
            on_batch(msgs)
            return ok
        return listen_async

    def listen_sync(msgs: list[StoredMessage], ctx: Any) -> Any:
        on_batch(msgs)
        return ok
    return listen_sync


def consumer_for(args: argparse.Namespace, namesrv: str, group: str, **options: Any) -> AsyncPushConsumer:
    return AsyncPushConsumer(
        group, namesrv, instance_name=f"{group}-client", consume_message_batch_max_size=args.batch,
        pull_batch_size=args.pull_batch, consume_thread_min=args.threads, consume_thread_max=args.threads,
        trace=False, **options)


async def create_topic(namesrv: str, topic: str) -> None:
    async with AsyncAdmin(namesrv, instance_name="bench-admin") as admin:
        await admin.create_topic(topic, queue_nums=QUEUES)


async def prefill(namesrv: str, topic: str, messages: int, size: int) -> int:
    """Send ``messages`` (rounded up to whole batches) as fast as batches go; returns how many."""
    batch = [Message.of(topic, b"x" * size) for _ in range(PREFILL_BATCH)]
    batches = -(-messages // PREFILL_BATCH)
    gate = asyncio.Semaphore(PREFILL_IN_FLIGHT)
    async with AsyncProducer("BenchmarkPrefill", namesrv, instance_name="bench-prefill", trace=False) as producer:
        async def one() -> None:
            async with gate:
                await producer.send_batch(batch)
        await asyncio.gather(*(one() for _ in range(batches)))
    return batches * PREFILL_BATCH


class Tracker:
    """What the listener saw: latencies, first and last delivery, and whether ``target`` arrived."""

    def __init__(self, target: int | None = None) -> None:
        self.lat = Latencies()
        self.target = target
        self.first_at = 0.0
        self.last_at = 0.0
        self.done = asyncio.Event()
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()

    def on_batch(self, msgs: Sequence[StoredMessage]) -> None:
        with self._lock:  # sync listeners call this from several threads
            if not self.first_at:
                self.first_at = time.perf_counter()
            self.lat.add(msgs)
            self.last_at = time.perf_counter()
            self.check()

    def check(self) -> None:
        if self.target is not None and self.lat.count >= self.target:
            self._loop.call_soon_threadsafe(self.done.set)

    @property
    def seconds(self) -> float:
        return self.last_at - self.first_at


class Drain:
    """Consume a backlog of ``expected`` messages and time it from the first delivery."""

    def __init__(self, args: argparse.Namespace, namesrv: str, expected: int, broker_pid: int | None) -> None:
        self.args = args
        self.namesrv = namesrv
        self.expected = expected
        self.tracker = Tracker(expected)
        self.broker_cpu = _ProcessCpu(broker_pid)

    async def run(self) -> ConsumeFigures:
        group = f"BenchmarkConsumer-{int(time.time() * 1000)}"
        consumer = self._lite(group) if self.args.lite else self._push(group)
        cpu_started = time.process_time()
        self.broker_cpu.mark()
        reporter = asyncio.ensure_future(report_windows(self.args, lambda: self.tracker.lat))
        await consumer.start()
        poller = asyncio.ensure_future(self._poll(consumer)) if isinstance(consumer, AsyncLitePullConsumer) else None
        try:
            await asyncio.wait_for(self.tracker.done.wait(), self.args.seconds)
        except asyncio.TimeoutError:
            print(f"stopped after {self.args.seconds} s with {self.tracker.lat.count} of {self.expected} consumed")
        cpu = time.process_time() - cpu_started
        broker_cpu = self.broker_cpu.since_mark()
        reporter.cancel()
        if poller is not None:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        await consumer.shutdown()
        return figures(self.tracker.lat, self.tracker.seconds, cpu, broker_cpu, self.args)

    def _push(self, group: str) -> AsyncPushConsumer:
        consumer = consumer_for(self.args, self.namesrv, group,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(self.args.topic, "*")
        listener = make_listener(self.args.listener, self.tracker.on_batch, self.args.orderly)
        if self.args.orderly:
            consumer.register_orderly_listener(listener)
        else:
            consumer.register_listener(listener)
        return consumer

    def _lite(self, group: str) -> AsyncLitePullConsumer:
        """``--lite``: an `AsyncLitePullConsumer` whose pulls of ``--pull-batch`` fill the batches
        `poll` returns (what a batch job and `skiff bench compare`'s Skiff consumer use)."""
        consumer = AsyncLitePullConsumer(
            group, self.namesrv, instance_name=f"{group}-client", pull_batch_size=self.args.pull_batch,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, trace=False)
        consumer.subscribe(self.args.topic, "*")
        return consumer

    async def _poll(self, consumer: AsyncLitePullConsumer) -> None:
        while True:
            msgs = await consumer.poll(LITE_POLL_MS)
            if msgs:
                self.tracker.on_batch(msgs)


async def report_windows(args: argparse.Namespace, latencies: Callable[[], Latencies]) -> None:
    """Print RocketMQ's consumer line for each ``--report-s`` window until cancelled."""
    seen = 0
    while True:
        await asyncio.sleep(args.report_s)
        total = latencies()
        window = total.since(seen)
        seen = total.count
        if not args.json:
            print(line(window.count / args.report_s, window), flush=True)


def add_consumer_options(parser: argparse.ArgumentParser) -> None:
    """Options `skiff bench consumer` and `skiff bench e2e` share."""
    parser.add_argument("-n", "--namesrv", help="NameServers of a running cluster (default: start one here)")
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--batch", type=int, default=32, help="messages per listener call (default 32)")
    parser.add_argument("--pull-batch", type=int, default=32, help="messages per pull (default 32)")
    parser.add_argument("--threads", type=int, default=20, help="listener threads or concurrent calls (default 20)")
    parser.add_argument("--listener", choices=("async", "sync"), default="async")
    parser.add_argument("--orderly", action="store_true",
                        help="an orderly listener (each queue's messages one batch at a time, queues locked)")
    parser.add_argument("--report-s", type=float, default=2.0, help="seconds between progress lines")
    parser.add_argument("--json", action="store_true", help="print the final figures as JSON only")
    parser.add_argument("--broker-arg", action="append", default=[], metavar="--KEY=VALUE",
                        help="extra setting for the broker the bench starts (repeatable)")


@contextmanager
def cluster(args: argparse.Namespace) -> Iterator[tuple[str, int | None]]:
    """(NameServer address, broker pid): ``-n``'s cluster, or one started here for the run."""
    if args.namesrv:
        yield args.namesrv, None
        return
    from skiff.testing.processes import start_broker, start_namesrv

    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as store, start_namesrv() as namesrv, \
            start_broker(store, namesrv.addr, *args.broker_arg) as broker:
        yield namesrv.addr, broker.pid


def print_figures(figs: ConsumeFigures, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(asdict(figs)))
        return
    print(f"\nTotal: {figs.messages:,} messages of {figs.size_bytes} B in {figs.seconds} s, "
          f"{figs.listener} listener, batch {figs.batch}")
    print(f"Consume TPS: {figs.consume_tps:,.0f} Average(B2C) RT(ms): {figs.average_b2c_ms} Average(S2C) RT(ms): "
          f"{figs.average_s2c_ms} MAX(B2C) RT(ms): {figs.max_b2c_ms} MAX(S2C) RT(ms): {figs.max_s2c_ms}")
    broker = "" if figs.broker_cpu_us_per_msg is None else f", broker CPU {figs.broker_cpu_us_per_msg} us"
    print(f"B2C p50 {figs.p50_b2c_ms} ms, p99 {figs.p99_b2c_ms} ms; S2C p50 {figs.p50_s2c_ms} ms, "
          f"p99 {figs.p99_s2c_ms} ms; per message: client CPU {figs.client_cpu_us_per_msg} us{broker}")


async def bench(args: argparse.Namespace, namesrv: str, broker_pid: int | None) -> ConsumeFigures:
    await create_topic(namesrv, args.topic)
    expected = args.messages
    if not args.no_prefill:
        started = time.perf_counter()
        expected = await prefill(namesrv, args.topic, args.messages, args.size)
        if not args.json:
            print(f"pre-filled {expected:,} messages in {time.perf_counter() - started:.1f} s", flush=True)
    return await Drain(args, namesrv, expected, broker_pid).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench consumer", description=__doc__.split("\n\n")[0])
    add_consumer_options(parser)
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--messages", type=int, default=300_000, help="backlog to drain (default 300,000)")
    parser.add_argument("--no-prefill", action="store_true", help="drain what the topic already holds")
    parser.add_argument("--seconds", type=float, default=120.0, help="give up after this long")
    parser.add_argument("--lite", action="store_true",
                        help="a lite pull consumer polling batches of --pull-batch (no listener: --batch, "
                             "--threads and --listener do not apply)")
    args = parser.parse_args(argv)
    if min(args.size, args.batch, args.pull_batch, args.threads, args.messages) < 1:
        parser.error("--size, --batch, --pull-batch, --threads and --messages must be at least 1")
    with cluster(args) as (namesrv, broker_pid):
        print_figures(run_coroutine(bench(args, namesrv, broker_pid)), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
