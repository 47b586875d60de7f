"""Where Skiff's batched end-to-end latency goes: the e2e workload of `skiff bench compare`,
with each message's latency split at the times its record carries.

`skiff bench compare` reports one figure per message, send stamp to receipt. This run
drives the same workload (the compare's producer worker: batches of ``--batch`` with
``--window`` in flight; an `AsyncLitePullConsumer` made by the compare's Skiff driver,
pulling ``--batch`` at a time) and splits each message's latency in three:

| stage              | from                           | to                                          |
|--------------------|--------------------------------|---------------------------------------------|
| producer           | the body's send stamp          | the record's bornTimestamp (the producer's  |
|                    | (taken when the batch is built)| encode: waiting for a window slot is before |
|                    |                                | the stamp, waiting behind the other batches |
|                    |                                | of the window is here)                      |
| to the store       | bornTimestamp                  | storeTimestamp (the broker's append)        |
| store to consumer  | storeTimestamp                 | `poll` returning the message (long-polling  |
|                    |                                | wake-up or the next pull, the answer, the   |
|                    |                                | decoding, the consumer's buffer)            |

Born and store timestamps are wall-clock milliseconds, the stamps monotonic nanoseconds:
one host, so the offset between the two clocks, read once, converts them (each stage is
good to about a millisecond). Run: ``python -m skiff.bench.compare.latency_split``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvloop

from skiff.bench.compare.drivers.base import BODY_HEAD
from skiff.bench.compare.drivers.skiff_client import POLL_TIMEOUT_MS, new_consumer
from skiff.bench.compare.phases import CONNECT_TIMEOUT_S, PhaseOptions, Worker
from skiff.bench.compare.servers import SkiffServer
from skiff.common.stored_message import StoredMessage

STAGES = ("producer_ms", "to_store_ms", "store_to_consumer_ms", "e2e_ms")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m skiff.bench.compare.latency_split", description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200_000, help="messages sent (the compare's e2e count)")
    p.add_argument("--size", type=int, default=100, help="message size in bytes")
    p.add_argument("--batch", type=int, default=256, help="messages per send and per pull")
    p.add_argument("--window", type=int, default=8, help="batches in flight")
    p.add_argument("--queues", type=int, default=8, help="queues of the topic")
    p.add_argument("--timeout-s", type=float, default=120.0, help="the consumer gives up after this")
    args = p.parse_args(argv)
    for name in ("count", "batch", "window", "queues"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    return args


class Split:
    """Stage latencies in ms, one row per polled batch weighted by its size: a pull answers one
    producer batch here (``--batch`` both ways), whose messages share their send stamp, born and
    store times (the first message stands for the batch, so the split costs the consumer
    no per-message Python that would slow the run it measures)."""

    def __init__(self) -> None:
        self.wall_minus_mono_ms = (time.time_ns() - time.monotonic_ns()) / 1e6
        self.stages: dict[str, list[float]] = {name: [] for name in STAGES}
        self.weights: list[int] = []
        self.received = 0

    def add(self, msgs: Sequence[StoredMessage]) -> None:
        if not msgs:
            return
        now_ms = time.monotonic_ns() / 1e6
        shift = self.wall_minus_mono_ms
        m = msgs[0]
        stamp_ms = BODY_HEAD.unpack_from(m.body)[0] / 1e6
        row = (m.born_timestamp - shift - stamp_ms, m.store_timestamp - m.born_timestamp,
               now_ms + shift - m.store_timestamp, now_ms - stamp_ms)
        for name, value in zip(STAGES, row):
            self.stages[name].append(value)
        self.weights.append(len(msgs))
        self.received += len(msgs)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"messages": self.received}
        for name, values in self.stages.items():
            out[name] = {"p50": _weighted_quantile(values, self.weights, 0.50),
                         "p99": _weighted_quantile(values, self.weights, 0.99)}
        return out


def _weighted_quantile(values: list[float], weights: list[int], q: float) -> float:
    """The value below which ``q`` of the weight lies (0.0 when there is none)."""
    rows = sorted(zip(values, weights))
    target = q * sum(weights)
    seen = 0
    for value, weight in rows:
        seen += weight
        if seen >= target:
            return round(value, 2)
    return 0.0


async def consume(namesrv: str, topic: str, args: argparse.Namespace, producer: Worker) -> dict[str, Any]:
    """Subscribe, let the producer go, and poll until every message came (or the timeout)."""
    consumer = new_consumer(namesrv, topic, args.batch)
    await consumer.start()
    split = Split()
    cpu0 = time.process_time()
    try:
        producer.send("GO")
        deadline = time.monotonic() + args.timeout_s
        while split.received < args.count and time.monotonic() < deadline:
            split.add(await consumer.poll(POLL_TIMEOUT_MS))
        cpu_s = time.process_time() - cpu0
    finally:
        await consumer.shutdown()
    # The consumer's CPU is steadier than its latency on a shared machine.
    return {**split.summary(), "consumer_cpu_us_per_msg": round(cpu_s * 1e6 / max(1, split.received), 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="skiff-latency-split-") as tmp:
        work = Path(tmp)
        server = SkiffServer(work, durable=False)
        server.start()
        try:
            topic = f"latency-split-{int(time.time())}"
            opts = PhaseOptions(args.batch, args.window, args.queues, args.timeout_s, work)
            producer = Worker("skiff", server, "produce", topic, args.size, args.count, opts)
            try:
                producer.wait_for("READY", CONNECT_TIMEOUT_S)  # the topic exists
                result = uvloop.run(consume(server.endpoint()["namesrv_addr"], topic, args, producer))
                sent = producer.result(args.timeout_s)
            finally:
                producer.stop()
        finally:
            server.stop()
    return {**result, "sent": sent["sent"], "count": args.count, "batch": args.batch, "window": args.window}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(json.dumps(result))
    return 0 if result["messages"] == result["sent"] == args.count else 1


if __name__ == "__main__":
    raise SystemExit(main())
