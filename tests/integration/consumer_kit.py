"""Helpers of the consumer integration tests: fast client settings, sending test
messages, waiting on conditions with deadlines, and a thread-safe record of what
each consumer received (by whom, from which queue, when)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skiff.client import AsyncAdmin, AsyncProducer, AsyncPushConsumer, ClientConfig, Message, MessageQueue, SendResult
from skiff.common.stored_message import StoredMessage
from skiff.transport.loop import run_coroutine

T = TypeVar("T")

FAST = {
    "rebalance_interval_ms": 1000,
    "poll_namesrv_interval_ms": 1000,
    "heartbeat_broker_interval_ms": 1000,
    "persist_consumer_offset_interval_ms": 300,
}
"""Client intervals small enough for tests (the defaults are 20-30 s)."""

DEADLINE_S = 60.0


def config(namesrv: str, instance_name: str = "DEFAULT") -> ClientConfig:
    return ClientConfig(namesrv, instance_name=instance_name, **FAST)


def run(coro: Awaitable[T]) -> T:
    return run_coroutine(coro)  # type: ignore[arg-type]


async def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    """Poll ``predicate`` every 20 ms until it holds; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


async def create_topic(namesrv: str, topic: str, queues: int = 4, *, order: bool = False) -> None:
    admin = AsyncAdmin(client_config=config(namesrv, "admin"))
    await admin.start()
    try:
        await admin.create_topic(topic, queue_nums=queues, order=order)
        await wait_for_route(admin, topic)
    finally:
        await admin.shutdown()


async def wait_for_route(admin: AsyncAdmin, topic: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            await admin.topic_route(topic)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def send(namesrv: str, msgs: Sequence[Message], *, selector: Any = None,
               key_of: Callable[[Message], str] | None = None) -> list[SendResult]:
    """Send ``msgs`` one by one (through ``selector`` with each one's key when given)."""
    async with AsyncProducer("test-producer", client_config=config(namesrv, "producer")) as producer:
        if selector is None:
            return list(await asyncio.gather(*(producer.send(m) for m in msgs)))
        assert key_of is not None
        return [await producer.send(m, selector=selector, arg=key_of(m)) for m in msgs]


def numbered(topic: str, count: int, *, prefix: str = "m", **options: Any) -> list[Message]:
    """``count`` messages whose bodies are ``<prefix><i>``; options go to `Message.of`."""
    return [Message.of(topic, f"{prefix}{i}", keys=f"{prefix}{i}", **options) for i in range(count)]


async def queue_ends(namesrv: str, topic: str) -> dict[MessageQueue, int]:
    """Each queue's max offset (where the next message will go)."""
    admin = AsyncAdmin(client_config=config(namesrv, "ends-reader"))
    await admin.start()
    try:
        return {q.mq: q.max_offset for q in await admin.topic_status(topic)}
    finally:
        await admin.shutdown()


async def wait_caught_up(consumer: AsyncPushConsumer, namesrv: str, topic: str) -> None:
    """Wait until ``consumer`` has gone past every message of ``topic`` stored now
    (delivered or filtered out): after it, nothing more of them can arrive."""
    ends = await queue_ends(namesrv, topic)

    def caught_up() -> bool:
        held = consumer.running_info().mq_table
        return all(mq in held and held[mq].commit_offset >= end for mq, end in ends.items())

    await wait_for(caught_up, f"the consumer to reach the end of {topic}")


@dataclass(frozen=True, slots=True)
class Delivery:
    consumer: str
    body: str
    mq: MessageQueue
    offset: int
    reconsume_times: int
    topic: str
    start_s: float
    end_s: float


@dataclass
class Recorder:
    """Everything the listeners of a test received, safe from any thread."""

    deliveries: list[Delivery] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, consumer: str, msgs: Iterable[StoredMessage], mq: MessageQueue, start_s: float) -> None:
        end = time.monotonic()
        with self._lock:
            self.deliveries.extend(
                Delivery(consumer, m.body.decode(), mq, m.queue_offset, m.reconsume_times, m.topic, start_s, end)
                for m in msgs)

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def bodies(self, consumer: str | None = None) -> Counter[str]:
        return Counter(d.body for d in self.snapshot() if consumer is None or d.consumer == consumer)

    def distinct(self) -> int:
        return len(self.bodies())

    def by_queue(self) -> dict[MessageQueue, list[Delivery]]:
        out: dict[MessageQueue, list[Delivery]] = defaultdict(list)
        for d in self.snapshot():
            out[d.mq].append(d)
        return out


def assert_all_received(recorder: Recorder, expected: Iterable[str]) -> Counter[str]:
    """Every expected body arrived; returns how often each did."""
    counts = recorder.bodies()
    missing = set(expected) - set(counts)
    assert not missing, f"{len(missing)} message(s) never arrived, e.g. {sorted(missing)[:5]}"
    return counts
