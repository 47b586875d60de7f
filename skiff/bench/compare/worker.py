"""One client process of a workload: a producer or a consumer of one system.

Run by the harness as `python -m skiff.bench.compare.worker ...`, one process per
role, so producer, consumer and broker each have their own interpreter.

Talk with the parent, one line each:

| direction | line              | meaning                                               |
|-----------|-------------------|-------------------------------------------------------|
| out       | `READY`           | connected and the topic exists; waiting for GO        |
| in        | `GO`              | start now (the parent's measurement has begun)        |
| out       | `SUBSCRIBED`      | consumer only: the subscription is live               |
| in        | `EXPECT n`        | consumer only: the producer got n acks; stop at n     |
| out       | `RESULT {json}`   | the phase's figures; the process then exits           |
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

import uvloop

from skiff.bench.compare.drivers import DRIVERS, driver_class
from skiff.bench.compare.drivers.base import BodyFactory, Driver, DriverOptions, Recorder

ACK_DRAIN_TIMEOUT_S = 60.0
"""How long the producer waits for the acks of batches already sent."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m skiff.bench.compare.worker")
    p.add_argument("--system", required=True, choices=sorted(DRIVERS))
    p.add_argument("--role", required=True, choices=("produce", "consume"))
    p.add_argument("--endpoint", required=True, help="JSON object from the server")
    p.add_argument("--topic", required=True, help="a topic, or several joined by commas (producer rotates)")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--window", type=int, default=8, help="batches in flight (producer)")
    p.add_argument("--fetch", type=int, default=0, help="messages per consumer fetch (default: --batch)")
    p.add_argument("--queues", type=int, default=8, help="queues per topic where that applies")
    p.add_argument("--duration-s", type=float, default=60.0, help="producer stops sending after this")
    p.add_argument("--timeout-s", type=float, default=300.0, help="consumer gives up after this")
    p.add_argument("--delete-after", action="store_true", help="delete the topic at the end")
    return p.parse_args(argv)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class ParentLines:
    """Lines from the parent on stdin, read on a thread and handed to the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        threading.Thread(target=self._read, name="stdin", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line.strip())
        self._loop.call_soon_threadsafe(self._queue.put_nowait, "EOF")

    async def next(self) -> str:
        return await self._queue.get()

    async def expect(self, word: str) -> None:
        line = await self.next()
        if line != word:
            raise RuntimeError(f"worker expected {word!r} from the parent, got {line!r}")


class _Tally:
    """Acked messages and errors of the batches in flight."""

    def __init__(self, window: int) -> None:
        self.slots = asyncio.Semaphore(window)
        self.pending: set[asyncio.Future[Any]] = set()
        self.acked = 0
        self.errors: list[str] = []

    def track(self, fut: asyncio.Future[Any], n: int) -> None:
        self.pending.add(fut)
        fut.add_done_callback(partial(self._settle, n=n))

    def _settle(self, fut: asyncio.Future[Any], n: int) -> None:
        self.slots.release()
        self.pending.discard(fut)
        exc = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
        if exc is None:
            self.acked += n
        elif len(self.errors) < 5:
            self.errors.append(repr(exc))


async def produce(driver: Driver, args: argparse.Namespace) -> dict[str, Any]:
    """Send ``count`` messages (or until ``duration_s``) with ``window`` batches in flight."""
    bodies, tally = BodyFactory(args.size), _Tally(args.window)
    t0 = time.monotonic_ns()
    deadline = t0 + int(args.duration_s * 1e9)
    topics = args.topic.split(",")
    seq = 0
    while seq < args.count and not tally.errors and time.monotonic_ns() < deadline:
        await tally.slots.acquire()
        n = min(args.batch, args.count - seq)
        topic = topics[(seq // args.batch) % len(topics)]
        try:
            fut = asyncio.ensure_future(await driver.publish(topic, bodies.batch(seq, n)))
        except Exception as exc:  # a refused send ends the phase; the report shows why
            tally.errors.append(repr(exc))
            break
        tally.track(fut, n)
        seq += n
    if tally.pending:
        await asyncio.wait(set(tally.pending), timeout=ACK_DRAIN_TIMEOUT_S)
    return {"sent": tally.acked, "attempted": seq, "t0_ns": t0, "t1_ns": time.monotonic_ns(),
            "errors": tally.errors, "timed_out": seq < args.count and not tally.errors}


async def consume(driver: Driver, args: argparse.Namespace, parent: ParentLines) -> dict[str, Any]:
    """Receive until the expected count (lowered by EXPECT) or the timeout."""
    recorder = Recorder(args.count)
    t0 = time.monotonic_ns()
    task = asyncio.create_task(driver.consume(args.topic, recorder))
    await _first(recorder.ready.wait(), task)
    emit("SUBSCRIBED")
    listener = asyncio.create_task(_listen_expect(parent, recorder))
    try:
        await asyncio.wait_for(_first(recorder.done.wait(), task), args.timeout_s)
        timed_out = False
    except asyncio.TimeoutError:
        timed_out = True
    listener.cancel()
    recorder.done.set()
    await _finish(task)
    return {**recorder.summary(), "t0_ns": t0, "timed_out": timed_out, "expected": recorder.expected}


async def _first(waiter: Any, task: asyncio.Task[None]) -> None:
    """Wait for ``waiter`` but surface the consume task's failure at once."""
    wait_task = asyncio.ensure_future(waiter)
    await asyncio.wait({wait_task, task}, return_when=asyncio.FIRST_COMPLETED)
    if task.done() and task.exception() is not None:
        wait_task.cancel()
        raise task.exception()  # type: ignore[misc]
    await wait_task


async def _finish(task: asyncio.Task[None]) -> None:
    try:
        await asyncio.wait_for(task, 5)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        pass


async def _listen_expect(parent: ParentLines, recorder: Recorder) -> None:
    while True:
        line = await parent.next()
        if line.startswith("EXPECT "):
            recorder.set_expected(int(line.split()[1]))
        elif line == "EOF":
            return


async def run(args: argparse.Namespace) -> dict[str, Any]:
    options = DriverOptions(batch=args.batch, size_bytes=args.size, queues=args.queues, fetch=args.fetch)
    driver = driver_class(args.system)(json.loads(args.endpoint), options)
    parent = ParentLines()
    await driver.connect()
    try:
        for topic in args.topic.split(","):
            await driver.prepare(topic)
        emit("READY")
        await parent.expect("GO")
        if args.role == "produce":
            return await produce(driver, args)
        result = await consume(driver, args, parent)
        if args.delete_after:
            await driver.delete(args.topic)
        return result
    finally:
        await driver.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = uvloop.run(run(args))
    emit("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
