"""Retries, dead letters, delays and half messages on a real broker: where each
message is parked, with what, and (with the timer) when it comes back."""

from __future__ import annotations

import time

import pytest

from skiff.common.message import Message
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, dlq_topic, retry_topic
from skiff.common.properties import Prop
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, with_wire

MAX_RETRIES = 2
LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
ANY_TIME_QUEUE = 18


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    args = [f"--maxReconsumeTimes={MAX_RETRIES}", f"--messageDelayLevel={LEVELS}"]
    with Cluster(tmp_path_factory.mktemp("retry"), broker_args=args) as c:
        yield c


async def send_back(wire: BrokerWire, msg_id: str, group: str, delay_level: int = 0):
    offset = decode_offset_msg_id(msg_id).physical_offset
    return await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": offset, "group": group,
                                                                "delayLevel": delay_level})


def test_send_back_parks_a_retry_then_dead_letters_it(cluster: Cluster):
    async def test(wire: BrokerWire):
        sent = await wire.send(Message.of("Work", b"job-1", tags="T", keys="job-1"))
        original = (await wire.pull_messages("G-work", "Work", 0))[0]
        assert (await send_back(wire, sent.ext("msgId"), "G-work")).code == ResponseCode.SUCCESS
        parked = await wire.pull_messages("G-watch", SCHEDULE_TOPIC, 2)  # level 3 + 0 retries: queue 2
        assert len(parked) == 1
        p = parked[0]
        assert (p.body, p.reconsume_times, p.tags) == (b"job-1", 1, "T")
        assert (p.properties[Prop.REAL_TOPIC], p.properties[Prop.REAL_QID]) == (retry_topic("G-work"), "0")
        assert p.properties[Prop.RETRY_TOPIC] == "Work"
        assert p.properties[Prop.ORIGIN_MESSAGE_ID] == original.offset_msg_id
        assert p.properties[Prop.UNIQ_KEY] == original.properties[Prop.UNIQ_KEY]
        assert abs(int(p.properties[Prop.TIMER_OUT_MS]) - (p.store_timestamp + 1000)) < 5

        # Retried MAX_RETRIES times already: the next failure goes to the dead-letter queue.
        tired = await wire.send(Message.of("Work", b"job-2"), reconsume_times=MAX_RETRIES)
        assert (await send_back(wire, tired.ext("msgId"), "G-work")).code == ResponseCode.SUCCESS
        negative = await wire.send(Message.of("Work", b"job-3"))
        assert (await send_back(wire, negative.ext("msgId"), "G-work", delay_level=-1)).code == ResponseCode.SUCCESS
        dead = await wire.pull_messages("G-dlq", dlq_topic("G-work"), 0)
        assert [(m.body, m.reconsume_times, m.properties[Prop.RETRY_TOPIC]) for m in dead] == [
            (b"job-2", MAX_RETRIES + 1, "Work"), (b"job-3", 1, "Work")]
        assert Prop.DELAY not in dead[0].properties

        missing = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": 1 << 40, "group": "G-work",
                                                                       "delayLevel": 0})
        assert missing.code == ResponseCode.SYSTEM_ERROR and "no message is stored" in missing.remark
    with_wire(cluster.broker_addr(), test)


def test_delayed_messages_are_parked_with_their_due_time(cluster: Cluster):
    async def test(wire: BrokerWire):
        before = int(time.time() * 1000)
        level = await wire.send(Message.of("Later", b"level-2", delay_level=2), queue_id=3)
        at = before + 60_000
        timed = await wire.send(Message.of("Later", b"at-time", deliver_time_ms=at), queue_id=1)
        assert (level.code, timed.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
        assert level.ext("queueId") == "3"  # the queue asked for, as RocketMQ answers
        assert await wire.pull_messages("G-later", "Later", 3) == []  # not visible before it is due
        [by_level] = await wire.pull_messages("G-watch", SCHEDULE_TOPIC, 1)
        [by_time] = await wire.pull_messages("G-watch", SCHEDULE_TOPIC, ANY_TIME_QUEUE)
        assert (by_level.body, by_level.properties[Prop.REAL_TOPIC], by_level.properties[Prop.REAL_QID]) == (
            b"level-2", "Later", "3")
        assert 2000 <= int(by_level.properties[Prop.TIMER_OUT_MS]) - before < 10_000
        assert (by_time.body, by_time.properties[Prop.REAL_QID], by_time.properties[Prop.TIMER_OUT_MS]) == (
            b"at-time", "1", str(at))
    with_wire(cluster.broker_addr(), test)


def test_half_messages_are_parked_out_of_sight(cluster: Cluster):
    async def test(wire: BrokerWire):
        half = Message.of("Orders", b"tx-1", properties={Prop.TRAN_MSG: "true", Prop.PGROUP: "PG-tx"})
        resp = await wire.send(half, sys_flag=0x4)
        assert resp.code == ResponseCode.SUCCESS
        assert await wire.pull_messages("G-orders", "Orders", 0) == []  # invisible to consumers of Orders
        [parked] = await wire.pull_messages("G-watch", TRANS_HALF_TOPIC, 0)
        assert (parked.body, parked.properties[Prop.REAL_TOPIC], parked.properties[Prop.PGROUP]) == (
            b"tx-1", "Orders", "PG-tx")
        assert parked.sys_flag & 0xC == 0
        assert parked.offset_msg_id == resp.ext("msgId")
    with_wire(cluster.broker_addr(), test)


def test_delayed_messages_and_retries_come_back_when_due(cluster: Cluster):
    async def test(wire: BrokerWire):
        sent_at = time.time()
        await wire.send(Message.of("Due", b"in-a-second", delay_level=1), queue_id=2)
        await wire.send(Message.of("Due", b"at-a-time", deliver_time_ms=int(sent_at * 1000) + 1500), queue_id=2)

        async def both():
            return len(await wire.pull_messages("G-due", "Due", 2)) == 2 or None
        await eventually(both, 15, "both delayed messages")
        got = await wire.pull_messages("G-due", "Due", 2)
        assert sorted(m.body for m in got) == [b"at-a-time", b"in-a-second"]
        for m in got:
            assert m.store_timestamp / 1000 - sent_at >= (0.95 if m.body == b"in-a-second" else 1.45)
            assert Prop.REAL_TOPIC not in m.properties and Prop.DELAY not in m.properties

        sent = await wire.send(Message.of("Flaky", b"retry-me"))
        await send_back(wire, sent.ext("msgId"), "G-flaky")
        retried = await eventually(lambda: wire.pull_messages("G-flaky", retry_topic("G-flaky"), 0), 15, "the retry")
        assert [(m.body, m.reconsume_times, m.properties[Prop.RETRY_TOPIC]) for m in retried] == [
            (b"retry-me", 1, "Flaky")]
    with_wire(cluster.broker_addr(), test)


def test_delayed_messages_survive_a_restart(cluster: Cluster):
    due_ms = int(time.time() * 1000) + 4000

    async def send(wire: BrokerWire):
        await wire.send(Message.of("Survivor", b"by-level", delay_level=2))  # 2 s
        await wire.send(Message.of("Survivor", b"by-time", deliver_time_ms=due_ms))
    with_wire(cluster.broker_addr(), send)
    cluster.restart_broker(0)

    async def check(wire: BrokerWire):
        async def both():
            got = await wire.pull_messages("G-survivor", "Survivor", 0)
            return len(got) == 2 and got
        got = await eventually(both, 20, "both delayed messages after the restart")
        assert sorted(m.body for m in got) == [b"by-level", b"by-time"]
        by_time = next(m for m in got if m.body == b"by-time")
        assert by_time.store_timestamp >= due_ms - 5
    with_wire(cluster.broker_addr(), check)
