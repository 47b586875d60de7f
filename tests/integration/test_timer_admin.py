"""The timer's admin through real processes: scheduled messages counted in their
slot, cancelled by msg id or offset msg id (and then never delivered, checked
after a message due just after them was), unknown and late cancels reported,
through `AsyncAdmin` and the `skiff timer` commands; RocketMQ's GET_ALL_DELAY_OFFSET."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from skiff.client import AsyncAdmin, AsyncPullClient, Message, MessageQueue, PullStatus, SendResult
from skiff.client.admin_results import BrokerTimer
from skiff.common.names import SCHEDULE_TOPIC
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.bodies.timer import CancelStatus
from skiff.testing.cluster import Cluster
from skiff.testing.processes import run_skiff
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from tests.integration.consumer_kit import config, create_topic, run, send

HOUR_MS = 3_600_000
"""The broker's default timerSlotMs."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("timer-admin")) as c:
        yield c


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def slot_count(admin: AsyncAdmin, slot_ms: int) -> int:
    (timer,) = await admin.timer_slots()
    assert timer.error is None and timer.slot_ms == HOUR_MS
    return sum(s.scheduled for s in timer.slots if s.slot_start_ms == slot_ms)


async def counts(admin: AsyncAdmin, slot_ms: int, want: int) -> bool:
    return await slot_count(admin, slot_ms) == want


async def bodies(ns: str, topic: str) -> list[str]:
    """Every message delivered to the one-queue ``topic`` so far."""
    async with AsyncPullClient(client_config=config(ns, "timer-reader")) as puller:
        out, offset = [], 0
        while True:
            result = await puller.pull(MessageQueue(topic, "broker-a", 0), offset, 32)
            if result.status is not PullStatus.FOUND:
                return out
            out += [m.body.decode() for m in result.messages]
            offset = result.next_begin_offset


def test_a_message_far_ahead_is_counted_in_its_slot_then_cancelled(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns = cluster.namesrv_addr
        await create_topic(ns, "TimerFar", 1)
        due = now_ms() + 5 * HOUR_MS
        slot = due - due % HOUR_MS
        async with AsyncAdmin(client_config=config(ns, "timer-admin")) as admin:
            before = await slot_count(admin, slot)
            far, other = await send(ns, [Message.of("TimerFar", "far", deliver_time_ms=due),
                                         Message.of("TimerFar", "other", deliver_time_ms=due + 1)])
            await eventually(lambda: counts(admin, slot, before + 2), 30, "both counted in their slot")
            result = await admin.cancel_scheduled(far.offset_msg_id)
            assert result.status is CancelStatus.CANCELLED and result.will_not_be_delivered
            (outcome,) = result.outcomes
            assert (outcome.broker_name, outcome.slot_start_ms, outcome.due_ms) == ("broker-a", slot, due)
            assert await slot_count(admin, slot) == before + 1
            again = await admin.cancel_scheduled(far.msg_id)
            assert again.status is CancelStatus.ALREADY_CANCELLED
            (timer,) = await admin.timer_slots()
            assert timer.stats.cancelled >= 1
        assert other.msg_id != far.msg_id

    run(scenario())


def test_a_cancelled_message_is_never_delivered(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns = cluster.namesrv_addr
        await create_topic(ns, "TimerSoon", 1)
        due = now_ms() + 3_000
        cancelled, control = await send(ns, [Message.of("TimerSoon", "cancelled", deliver_time_ms=due),
                                              Message.of("TimerSoon", "control", deliver_time_ms=due + 300)])
        async with AsyncAdmin(client_config=config(ns, "timer-admin-soon")) as admin:
            result = await admin.cancel_scheduled(cancelled.msg_id)
            assert result.status is CancelStatus.CANCELLED, result
            got = await eventually(lambda: _delivered(ns, "control"), 30, "the control message's delivery")
            assert got == ["control"], "the message due 300 ms earlier was cancelled, so it never came"
            late = await admin.cancel_scheduled(control.msg_id)
            assert late.status is CancelStatus.ALREADY_DELIVERED and not late.will_not_be_delivered

    run(scenario())


async def _delivered(ns: str, wanted: str) -> list[str] | None:
    got = await bodies(ns, "TimerSoon")
    return got if wanted in got else None


def test_an_unknown_id_is_not_found(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with AsyncAdmin(client_config=config(cluster.namesrv_addr, "timer-admin-unknown")) as admin:
            result = await admin.cancel_scheduled("7F000001000022B800000000DEADBEEF")
            assert result.status is CancelStatus.NOT_FOUND and result.outcomes == () and not result.failures
            assert not result.will_not_be_delivered

    run(scenario())


def test_the_timer_commands(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    due = now_ms() + 30 * HOUR_MS

    async def schedule() -> SendResult:
        await create_topic(ns, "TimerCli", 1)
        (sent,) = await send(ns, [Message.of("TimerCli", "by the cli", deliver_time_ms=due)])
        async with AsyncAdmin(client_config=config(ns, "timer-admin-cli")) as admin:
            await eventually(lambda: counts(admin, due - due % HOUR_MS, 1), 30, "the message counted")
        return sent

    sent = run(schedule())
    slots = run_skiff(["timer", "slots", "-n", ns, "--json"])
    assert slots.returncode == 0, slots.stdout
    (timer,) = orjson.loads(slots.stdout)
    assert timer["broker_name"] == "broker-a" and timer["error"] is None
    assert {"slotStartMs": due - due % HOUR_MS, "scheduled": 1, "loaded": False} in timer["slots"]
    table = run_skiff(["timer", "slots", "-n", ns])
    assert table.returncode == 0 and "SLOT START" in table.stdout and "broker-a (" in table.stdout

    cancel = run_skiff(["timer", "cancel", sent.msg_id, "-n", ns])
    assert cancel.returncode == 0, cancel.stdout
    assert f"{sent.msg_id}: CANCELLED" in cancel.stdout and "broker-a" in cancel.stdout
    twice = run_skiff(["timer", "cancel", sent.msg_id, "-n", ns, "--json"])
    assert twice.returncode == 0 and orjson.loads(twice.stdout)["status"] == "ALREADY_CANCELLED"
    unknown = run_skiff(["timer", "cancel", "NO-SUCH-ID", "-n", ns])
    assert unknown.returncode == 1
    assert "NO-SUCH-ID: NOT_FOUND" in unknown.stdout
    assert "cannot cancel NO-SUCH-ID: no broker holds a scheduled message with this id" in unknown.stdout


def test_slots_of_a_broker_that_is_not_there_are_reported(cluster: Cluster) -> None:
    async def scenario() -> list[BrokerTimer]:
        async with AsyncAdmin(client_config=config(cluster.namesrv_addr, "timer-admin-gone")) as admin:
            return await admin.timer_slots(broker_addr="127.0.0.1:1")

    (gone,) = run(scenario())
    assert gone.addr == "127.0.0.1:1" and gone.error and gone.slots == ()


async def _delay_offsets(wire: BrokerWire) -> dict[str, int]:
    resp = await wire.call(RequestCode.GET_ALL_DELAY_OFFSET)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return orjson.loads(resp.body)["offsetTable"]


async def _parked_end(wire: BrokerWire, level: int) -> int:
    resp = await wire.call(RequestCode.GET_MAX_OFFSET, {"topic": SCHEDULE_TOPIC, "queueId": level - 1})
    return int(resp.ext("offset"))


def test_get_all_delay_offset_answers_the_delivered_offset_per_level(cluster: Cluster) -> None:
    """GET_ALL_DELAY_OFFSET (45), what a RocketMQ slave copies into delayOffset.json: level 1
    (1 s) reaches the end of its queue once its messages are delivered; level 4 (30 s)
    stays at or before the first message not yet due."""
    async def scenario() -> None:
        ns = cluster.namesrv_addr
        await create_topic(ns, "TimerLevels", 1)
        wire = BrokerWire(cluster.broker_addr(0))
        try:
            waiting_from = await _parked_end(wire, 4)
            await send(ns, [Message.of("TimerLevels", f"soon {i}", delay_level=1) for i in range(3)]
                       + [Message.of("TimerLevels", "later", delay_level=4)])
            await eventually(lambda: _delivered(ns, 3), 30, "the level-1 messages delivered")
            end = await _parked_end(wire, 1)

            async def caught_up() -> bool:
                return (await _delay_offsets(wire)).get("1") == end
            await eventually(caught_up, 10, "level 1's offset at its queue's end")
            table = await _delay_offsets(wire)
            assert table["4"] <= waiting_from < await _parked_end(wire, 4)
            assert set(table) <= {str(level) for level in range(1, 19)}
        finally:
            await wire.close()

    async def _delivered(ns: str, count: int) -> bool:
        return sorted(await bodies(ns, "TimerLevels")) == [f"soon {i}" for i in range(count)]

    run(scenario())
