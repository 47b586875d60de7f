"""End-to-end benchmark: ``skiff bench e2e`` or ``python -m skiff.bench.e2e``.

A push consumer and a producer in one process: the consumer starts first (a new
group on a new topic), then the producer sends batches of ``--send-batch``
messages of ``--size`` bytes for ``--seconds``, at ``--rate`` messages per
second (0: as fast as it can). Prints Send TPS and Consume TPS and RocketMQ's
born-to-consume (B2C: producer's clock to listener) and store-to-consume (S2C:
broker's store to listener) latencies with p50 and p99 — under a steady rate,
the delivery latency a user sees.

Without ``-n`` it starts a NameServer and a broker of its own on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from skiff.bench.consumer import (
    ConsumeFigures,
    Tracker,
    add_consumer_options,
    cluster,
    consumer_for,
    create_topic,
    figures,
    make_listener,
    print_figures,
    report_windows,
)
from skiff.bench.producer import _ProcessCpu
from skiff.client.producer import AsyncProducer
from skiff.common.message import Message
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.transport.loop import run_coroutine

DRAIN_TIMEOUT_S = 60.0
"""How long the consumer may take, after the last send, to receive everything."""


@dataclass(frozen=True, slots=True)
class E2eFigures:
    sent: int
    send_tps: float
    send_failed: int
    consume: ConsumeFigures
    rate: int


class EndToEnd:
    def __init__(self, args: argparse.Namespace, namesrv: str, broker_pid: int | None) -> None:
        self.args = args
        self.namesrv = namesrv
        self.tracker = Tracker()
        self.sent = 0
        self.failed = 0
        self.broker_cpu = _ProcessCpu(broker_pid)

    async def run(self) -> E2eFigures:
        topic = f"BenchmarkE2e-{int(time.time() * 1000)}"
        await create_topic(self.namesrv, topic)
        consumer = consumer_for(self.args, self.namesrv, f"{topic}-consumer",
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic, "*")
        consumer.register_listener(make_listener(self.args.listener, self.tracker.on_batch))
        await consumer.start()
        reporter = asyncio.ensure_future(report_windows(self.args, lambda: self.tracker.lat))
        cpu_started = time.process_time()
        self.broker_cpu.mark()
        try:
            send_started = time.perf_counter()
            await self._produce(topic)
            send_seconds = time.perf_counter() - send_started
            self.tracker.target = self.sent
            self.tracker.check()
            try:
                await asyncio.wait_for(self.tracker.done.wait(), DRAIN_TIMEOUT_S)
            except asyncio.TimeoutError:
                print(f"only {self.tracker.lat.count} of {self.sent} arrived within {DRAIN_TIMEOUT_S} s after the sends")
        finally:
            reporter.cancel()
            cpu = time.process_time() - cpu_started
            broker_cpu = self.broker_cpu.since_mark()
            await consumer.shutdown()
        consumed = figures(self.tracker.lat, self.tracker.seconds, cpu, broker_cpu, self.args)
        return E2eFigures(self.sent, round(self.sent / send_seconds, 1), self.failed, consumed, self.args.rate)

    async def _produce(self, topic: str) -> None:
        """Send for ``--seconds`` from ``--in-flight`` workers; with ``--rate``, each batch waits
        for its slot in time."""
        args = self.args
        batch = [Message.of(topic, b"x" * args.size) for _ in range(args.send_batch)]
        async with AsyncProducer(f"{topic}-producer", self.namesrv, instance_name="bench-e2e-producer",
                                 trace=False) as producer:
            start = time.monotonic()
            slots = 0

            async def worker() -> None:
                nonlocal slots
                while time.monotonic() < start + args.seconds:
                    if args.rate:
                        due = start + slots * len(batch) / args.rate
                        slots += 1
                        if due > time.monotonic():
                            await asyncio.sleep(due - time.monotonic())
                    try:
                        await (producer.send(batch[0]) if len(batch) == 1 else producer.send_batch(batch))
                        self.sent += len(batch)
                    except Exception:  # noqa: BLE001 - counted, as RocketMQ's benchmark does
                        self.failed += len(batch)

            await asyncio.gather(*(worker() for _ in range(args.in_flight)))


async def run(args: argparse.Namespace, namesrv: str, broker_pid: int | None) -> E2eFigures:
    return await EndToEnd(args, namesrv, broker_pid).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench e2e", description=__doc__.split("\n\n")[0])
    add_consumer_options(parser)
    parser.add_argument("--rate", type=int, default=20_000, help="messages per second sent (0: unlimited)")
    parser.add_argument("--send-batch", type=int, default=32, help="messages per send (default 32)")
    parser.add_argument("--in-flight", type=int, default=4, help="sends outstanding (default 4)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to send")
    args = parser.parse_args(argv)
    if min(args.size, args.batch, args.pull_batch, args.threads, args.send_batch, args.in_flight) < 1 or args.rate < 0:
        parser.error("sizes, batches and --threads must be at least 1, --rate not negative")
    with cluster(args) as (namesrv, broker_pid):
        result = run_coroutine(run(args, namesrv, broker_pid))
    if args.json:
        print(json.dumps(asdict(result)))
        return 0
    rate = f"{result.rate:,} msg/s asked" if result.rate else "unlimited"
    print(f"\nSent {result.sent:,} ({rate}): Send TPS {result.send_tps:,.0f}, Send Failed {result.send_failed}")
    print_figures(result.consume, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
