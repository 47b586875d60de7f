"""Producer benchmark: ``skiff bench producer`` or ``python -m skiff.bench.producer``.

Sends messages of ``--size`` bytes to one topic for ``--seconds`` with
``--in-flight`` requests outstanding, as batches of ``--batch`` messages
(``--batch 1``: one message per SEND). Prints RocketMQ's benchmark fields
each ``--report-s`` seconds and at the end: Send TPS, Max RT, Average RT,
Send Failed, Response Failed, plus the p50 and p99 request round trip and the
client's CPU time per message (the number that says whether the client is the
bottleneck).

Without ``-n`` it starts a NameServer and a broker of its own on 127.0.0.1
(child processes, a temporary store), so one command measures the whole path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from skiff.client.admin import AsyncAdmin
from skiff.client.producer import AsyncProducer
from skiff.common.message import Message
from skiff.protocol.errors import ResponseError
from skiff.transport.loop import run_coroutine

TOPIC = "BenchmarkTest"
GROUP = "BenchmarkProducer"
QUEUES = 8


@dataclass(slots=True)
class Tally:
    """Counts and request round trips (ms) since the last report."""

    sent: int = 0
    send_failed: int = 0
    response_failed: int = 0
    rts_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Figures:
    seconds: float
    messages: int
    send_tps: float
    max_rt_ms: float
    average_rt_ms: float
    p50_rt_ms: float
    p99_rt_ms: float
    send_failed: int
    response_failed: int
    client_cpu_us_per_msg: float
    broker_cpu_us_per_msg: float | None
    """Measured when the bench started the broker itself (needs psutil)."""
    size_bytes: int
    batch: int
    in_flight: int


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


class Bench:
    def __init__(self, args: argparse.Namespace, namesrv: str, broker_pid: int | None = None) -> None:
        self.args = args
        self.namesrv = namesrv
        self.broker_cpu = _ProcessCpu(broker_pid)
        self.total = Tally()
        self.window = Tally()
        self.stop_at = 0.0

    async def run(self) -> Figures:
        async with AsyncAdmin(self.namesrv, instance_name="bench-admin") as admin:
            await admin.create_topic(self.args.topic, queue_nums=QUEUES)
        async with AsyncProducer(GROUP, self.namesrv, instance_name="bench-producer",
                                 trace=self.args.trace) as producer:
            batch = [Message.of(self.args.topic, b"x" * self.args.size) for _ in range(self.args.batch)]
            await self._send(producer, batch)  # warm the route and the connection
            self.total = Tally()
            self.window = Tally()
            started, cpu_started = time.perf_counter(), time.process_time()
            self.broker_cpu.mark()
            self.stop_at = time.monotonic() + self.args.seconds
            reporter = asyncio.ensure_future(self._report())
            await asyncio.gather(*(self._worker(producer, batch) for _ in range(self.args.in_flight)))
            reporter.cancel()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            broker_cpu = self.broker_cpu.since_mark()
        return self._figures(elapsed, cpu, broker_cpu)

    async def _send(self, producer: AsyncProducer, batch: list[Message]) -> int:
        if len(batch) == 1:
            await producer.send(batch[0])
        else:
            await producer.send_batch(batch)
        return len(batch)

    async def _worker(self, producer: AsyncProducer, batch: list[Message]) -> None:
        while time.monotonic() < self.stop_at:
            t0 = time.perf_counter()
            try:
                n = await self._send(producer, batch)
            except Exception as exc:  # noqa: BLE001 - counted, as RocketMQ's benchmark does
                self._failed(exc)
                continue
            rt_ms = (time.perf_counter() - t0) * 1000
            for tally in (self.total, self.window):
                tally.sent += n
                tally.rts_ms.append(rt_ms)

    def _failed(self, exc: Exception) -> None:
        """A broker's error answer is a response failure; anything else (no answer) a send failure."""
        answered = isinstance(exc, ResponseError) or isinstance(exc.__cause__, ResponseError)
        for tally in (self.total, self.window):
            if answered:
                tally.response_failed += 1
            else:
                tally.send_failed += 1
        if self.total.send_failed + self.total.response_failed == 1:
            print(f"first send failure: {exc}", file=sys.stderr)

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(self.args.report_s)
            w, self.window = self.window, Tally()
            if not self.args.json:
                print(_line(w.sent / self.args.report_s, w), flush=True)

    def _figures(self, elapsed: float, cpu: float, broker_cpu: float | None) -> Figures:
        t = self.total
        rts = t.rts_ms
        return Figures(
            round(elapsed, 3), t.sent, round(t.sent / elapsed, 1), round(max(rts, default=0.0), 3),
            round(statistics.fmean(rts), 3) if rts else 0.0, round(percentile(rts, 0.5), 3),
            round(percentile(rts, 0.99), 3), t.send_failed, t.response_failed,
            _per_msg_us(cpu, t.sent), _per_msg_us(broker_cpu, t.sent) if broker_cpu is not None else None,
            self.args.size, self.args.batch, self.args.in_flight,
        )


def _per_msg_us(cpu_s: float, messages: int) -> float:
    return round(cpu_s / messages * 1e6, 2) if messages else 0.0


class _ProcessCpu:
    """CPU seconds another process (the broker) used since `mark`; None without psutil or a pid."""

    def __init__(self, pid: int | None) -> None:
        self._proc = None
        if pid is not None:
            try:
                import psutil

                self._proc = psutil.Process(pid)
            except ImportError:
                pass
        self._marked = 0.0

    def _cpu(self) -> float:
        assert self._proc is not None
        times = self._proc.cpu_times()
        return float(times.user + times.system)

    def mark(self) -> None:
        if self._proc is not None:
            self._marked = self._cpu()

    def since_mark(self) -> float | None:
        return self._cpu() - self._marked if self._proc is not None else None


def _line(tps: float, t: Tally) -> str:
    rts = t.rts_ms
    avg = statistics.fmean(rts) if rts else 0.0
    return (f"Send TPS: {tps:,.0f} Max RT(ms): {max(rts, default=0.0):.3f} Average RT(ms): {avg:.3f} "
            f"Send Failed: {t.send_failed} Response Failed: {t.response_failed}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench producer", description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--namesrv", help="NameServers of a running cluster (default: start one here)")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--batch", type=int, default=64, help="messages per request (default 64; 1 = single sends)")
    parser.add_argument("--in-flight", type=int, default=8, help="requests outstanding (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--report-s", type=float, default=2.0, help="seconds between progress lines")
    parser.add_argument("--json", action="store_true", help="print the final figures as JSON only")
    parser.add_argument("--trace", action="store_true",
                        help="trace every send to RMQ_SYS_TRACE_TOPIC (off by default, as in RocketMQ's benchmark)")
    args = parser.parse_args(argv)
    if args.size < 1 or args.batch < 1 or args.in_flight < 1:
        parser.error("--size, --batch and --in-flight must be at least 1")
    if args.namesrv:
        return _print(run_coroutine(Bench(args, args.namesrv).run()), args)
    from skiff.testing.processes import start_broker, start_namesrv

    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as store, start_namesrv() as namesrv, \
            start_broker(store, namesrv.addr) as broker:
        return _print(run_coroutine(Bench(args, namesrv.addr, broker.pid).run()), args)


def _print(figures: Figures, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(asdict(figures)))
        return 0
    print(f"\nTotal: {figures.messages:,} messages of {figures.size_bytes} B in {figures.seconds} s, "
          f"batch {figures.batch}, {figures.in_flight} in flight")
    print(f"Send TPS: {figures.send_tps:,.0f} Max RT(ms): {figures.max_rt_ms} Average RT(ms): "
          f"{figures.average_rt_ms} Send Failed: {figures.send_failed} Response Failed: {figures.response_failed}")
    broker = "" if figures.broker_cpu_us_per_msg is None else f", broker CPU {figures.broker_cpu_us_per_msg} us"
    print(f"RT p50 {figures.p50_rt_ms} ms, p99 {figures.p99_rt_ms} ms; per message: client CPU "
          f"{figures.client_cpu_us_per_msg} us{broker}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
