"""Delivery at any time through real broker processes: on time on the wall clock, and
exactly once across a SIGKILL and a restart in the middle."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter

import numpy as np
import pytest

from skiff.common.message import Message
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.protocol.codes import ResponseCode
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from skiff.transport.loop import run_coroutine

QUEUES = 4
LATENESS_BOUND_MS = 1_500
"""Loose on purpose (a shared 2-core machine); the bench measures the real figure."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("timer")) as c:
        yield c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def send_timed(wire: BrokerWire, topic: str, dues: dict[bytes, int]) -> None:
    """Send each body with its delivery time, a few at a time."""
    async def one(body: bytes, due: int) -> None:
        resp = await wire.send(Message.of(topic, body, deliver_time_ms=due), queue_id=hash(body) % QUEUES)
        assert resp.code == ResponseCode.SUCCESS, resp.remark

    items = list(dues.items())
    for i in range(0, len(items), 20):
        await asyncio.gather(*(one(body, due) for body, due in items[i : i + 20]))


async def delivered(wire: BrokerWire, topic: str) -> list[StoredMessage]:
    out: list[StoredMessage] = []
    for q in range(QUEUES):
        out += await wire.pull_messages("G-timer-check", topic, q)
    return out


async def wait_delivered(wire: BrokerWire, topic: str, count: int, timeout_s: float = 30) -> list[StoredMessage]:
    async def enough() -> list[StoredMessage] | None:
        got = await delivered(wire, topic)
        return got if len(got) >= count else None
    return await eventually(enough, timeout_s, f"{count} deliveries in {topic}")


def check_exactly_once_not_early(got: list[StoredMessage], dues: dict[bytes, int]) -> np.ndarray:
    """Each body once with one UNIQ_KEY each, none before its time; return the lateness (ms)."""
    assert sorted(Counter(m.body for m in got).items()) == sorted((b, 1) for b in dues)
    assert len({m.properties[Prop.UNIQ_KEY] for m in got}) == len(dues)
    assert all(Prop.TIMER_ID in m.properties and Prop.TIMER_OUT_MS not in m.properties for m in got)
    early = [(m.body, m.store_timestamp, dues[m.body]) for m in got if m.store_timestamp < dues[m.body]]
    assert early == []
    return np.array([m.store_timestamp - dues[m.body] for m in got])


def test_timed_messages_arrive_on_time(cluster: Cluster) -> None:
    rng = random.Random(11)

    async def main() -> None:
        wire = BrokerWire(cluster.broker_addr())
        try:
            start = now_ms()
            dues = {f"on-time-{i}".encode(): start + 1_000 + rng.randrange(3_000) for i in range(200)}
            await send_timed(wire, "Timed", dues)
            lateness = check_exactly_once_not_early(await wait_delivered(wire, "Timed", len(dues)), dues)
            assert np.percentile(lateness, 99) < LATENESS_BOUND_MS, np.percentile(lateness, [50, 99, 100])
        finally:
            await wire.close()
    run_coroutine(main())


def test_a_kill_and_a_restart_in_the_middle_lose_and_repeat_nothing(cluster: Cluster) -> None:
    rng = random.Random(12)
    start = now_ms()
    dues = {f"restart-{i}".encode(): start + 1_500 + rng.randrange(5_000) for i in range(120)}

    async def with_wire(step) -> object:
        wire = BrokerWire(cluster.broker_addr())
        try:
            return await step(wire)
        finally:
            await wire.close()

    run_coroutine(with_wire(lambda wire: send_timed(wire, "Restarted", dues)))
    run_coroutine(with_wire(lambda wire: wait_delivered(wire, "Restarted", 15)))
    cluster.kill_broker(0)
    cluster.start_broker(0)
    run_coroutine(with_wire(lambda wire: wait_delivered(wire, "Restarted", 60)))
    cluster.restart_broker(0)
    got = run_coroutine(with_wire(lambda wire: wait_delivered(wire, "Restarted", len(dues))))
    check_exactly_once_not_early(got, dues)  # type: ignore[arg-type]
