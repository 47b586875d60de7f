"""POP consumption (RocketMQ 5.x's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME)
against a real broker process: hiding, acknowledging, redelivery through the retry
topic, dead letters, orderly blocking, long polling, and a crash and a restart."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from skiff.common.message import Message
from skiff.common.names import dlq_topic, pop_retry_topic
from skiff.common.properties import Prop
from skiff.protocol.codes import PopRequestCode, PopResponseCode, RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire, with_wire

MAX_RETRIES = 1
ARGS = ["--reviveInterval=100", f"--maxReconsumeTimes={MAX_RETRIES}", "--popStatePersistInterval=100",
        "--popFromRetryProbability=100"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("pop"), broker_args=ARGS) as c:
        yield c


async def send_all(wire: BrokerWire, topic: str, bodies: list[bytes], queue_id: int = 0, **kw: str) -> None:
    for body in bodies:
        resp = await wire.send(Message.of(topic, body, **kw), queue_id=queue_id)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def pop_until(wire: BrokerWire, group: str, topic: str, n: int, **kw: object):
    """Pop (each call long-polling) until ``n`` messages came back."""
    got = []

    async def more():
        _, found = await wire.pop(group, topic, poll_ms=500, **kw)  # type: ignore[arg-type]
        got.extend(found)
        return len(got) >= n
    await eventually(more, 20, f"{n} popped messages")
    return got


def test_pop_hides_acks_and_redelivers_through_the_retry_topic(cluster: Cluster):
    async def test(wire: BrokerWire):
        await send_all(wire, "PopA", [b"a0", b"a1", b"a2"], tags="T", keys="k")
        resp, found = await wire.pop("G-a", "PopA", invisible_ms=60_000)
        assert resp.code == ResponseCode.SUCCESS
        assert [m.body for m, _ in found] == [b"a0", b"a1", b"a2"]
        assert {h.pop_time for _, h in found} == {int(resp.ext("popTime"))}
        assert resp.ext("msgOffsetInfo") == "0 0 0,1,2" and resp.ext("startOffsetInfo") == "0 0 0"
        (m0, h0), (m1, h1), (_, h2) = found

        nothing, _ = await wire.pop("G-a", "PopA")  # all three hidden; no poll time: at once
        assert nothing.code == PopResponseCode.NO_MESSAGE
        other, others = await wire.pop("G-other", "PopA")  # another group sees them all
        assert len(others) == 3 and other.ext("restNum") == "0"
        one, _ = await wire.pop("G-rest", "PopA", queue_id=0, max_nums=1)
        assert one.ext("restNum") == "2"

        assert (await wire.ack("G-a", "PopA", h0)).code == ResponseCode.SUCCESS
        again = await wire.ack("G-a", "PopA", h0)
        assert again.code == PopResponseCode.NO_MESSAGE and "not in flight" in again.remark
        changed = await wire.change_invisible("G-a", "PopA", h1, 200)
        assert changed.code == ResponseCode.SUCCESS and int(changed.ext("invisibleTime")) == 200
        stale = await wire.ack("G-a", "PopA", h1)  # the old handle was replaced
        assert stale.code == PopResponseCode.NO_MESSAGE

        [(back, hb)] = await pop_until(wire, "G-a", "PopA", 1)
        assert (back.body, back.reconsume_times, back.topic) == (b"a1", 1, pop_retry_topic("G-a", "PopA"))
        assert (back.properties[Prop.RETRY_TOPIC], back.tags, back.keys) == ("PopA", "T", ["k"])
        assert back.properties[Prop.UNIQ_KEY] == m1.properties[Prop.UNIQ_KEY]
        assert (await wire.ack("G-a", "PopA", hb)).code == ResponseCode.SUCCESS
        assert (await wire.ack("G-a", "PopA", h2)).code == ResponseCode.SUCCESS
        assert (await wire.pop("G-a", "PopA"))[0].code == PopResponseCode.NO_MESSAGE

        foreign = await wire.ack("G-a", "PopA", h2._replace(broker_name="broker-z"))
        assert foreign.code == ResponseCode.MESSAGE_ILLEGAL and "from broker broker-z" in foreign.remark
        mixed = await wire.call(PopRequestCode.ACK_MESSAGE, {"consumerGroup": "G-a", "topic": "PopA", "queueId": 0,
                                                             "extraInfo": h2.encode(), "offset": 7})
        assert mixed.code == ResponseCode.MESSAGE_ILLEGAL and "not the handle's" in mixed.remark
        garbled = await wire.call(PopRequestCode.ACK_MESSAGE, {"consumerGroup": "G-a", "topic": "PopA",
                                                               "queueId": 0, "extraInfo": "1 2 x", "offset": 7})
        assert garbled.code == ResponseCode.MESSAGE_ILLEGAL and "space-separated fields" in garbled.remark
        unknown, _ = await wire.pop("G-a", "NoSuchTopic")
        assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
        too_many, _ = await wire.pop("G-a", "PopA", max_nums=33)
        assert too_many.code == ResponseCode.MESSAGE_ILLEGAL
    with_wire(cluster.broker_addr(), test)


def test_filters_long_polling_and_dead_letters(cluster: Cluster):
    async def test(wire: BrokerWire):
        await send_all(wire, "PopB", [b"skip"], tags="drop")
        waiting = asyncio.ensure_future(wire.pop("G-b", "PopB", poll_ms=8000, expression="keep", invisible_ms=100))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await send_all(wire, "PopB", [b"b0"], tags="keep")
        resp, found = await waiting
        assert resp.code == ResponseCode.SUCCESS and time.monotonic() - started < 5
        assert [m.body for m, _ in found] == [b"b0"]

        # Never acknowledged: delivered 1 + MAX_RETRIES times, then dead-lettered.
        deliveries = [found[0][0]]
        for _ in range(MAX_RETRIES):
            [(m, _)] = await pop_until(wire, "G-b", "PopB", 1, invisible_ms=100, expression="keep")
            deliveries.append(m)
        assert [m.reconsume_times for m in deliveries] == list(range(MAX_RETRIES + 1))

        async def dead():
            return await wire.pull_messages("G-watch", dlq_topic("G-b"), 0)
        [dl] = await eventually(dead, 15, "the dead letter")
        assert (dl.body, dl.reconsume_times, dl.properties[Prop.RETRY_TOPIC]) == (b"b0", MAX_RETRIES + 1, "PopB")
        timeout, _ = await wire.pop("G-b", "PopB", poll_ms=300, expression="keep")
        assert timeout.code == PopResponseCode.POLLING_TIMEOUT
    with_wire(cluster.broker_addr(), test)


def test_orderly_pop_blocks_the_queue_until_acked(cluster: Cluster):
    async def test(wire: BrokerWire):
        await send_all(wire, "PopC", [b"c0", b"c1"], queue_id=1)
        resp, first = await wire.pop("G-c", "PopC", queue_id=1, max_nums=2, order=True, attempt_id="A")
        assert [m.body for m, _ in first] == [b"c0", b"c1"] and resp.ext("reviveQid") == "999"
        await send_all(wire, "PopC", [b"c2"], queue_id=1)
        blocked, _ = await wire.pop("G-c", "PopC", queue_id=1, order=True, attempt_id="B")
        assert blocked.code == PopResponseCode.NO_MESSAGE
        _, same = await wire.pop("G-c", "PopC", queue_id=1, order=True, attempt_id="A")  # the client's retry
        assert [m.body for m, _ in same] == [b"c0", b"c1"]
        assert (await wire.ack("G-c", "PopC", same[0][1])).code == ResponseCode.SUCCESS
        still, _ = await wire.pop("G-c", "PopC", queue_id=1, order=True, attempt_id="C")
        assert still.code == PopResponseCode.NO_MESSAGE  # c1 is still out
        assert (await wire.ack("G-c", "PopC", same[1][1])).code == ResponseCode.SUCCESS

        resp, nxt = await wire.pop("G-c", "PopC", queue_id=1, order=True, attempt_id="D", invisible_ms=200)
        assert [m.body for m, _ in nxt] == [b"c2"]
        [(m, h)] = await pop_until(wire, "G-c", "PopC", 1, queue_id=1, order=True, attempt_id="E")
        assert m.body == b"c2" and m.topic == "PopC"  # served again in place, not via a retry topic
        assert (await wire.ack("G-c", "PopC", h)).code == ResponseCode.SUCCESS
    with_wire(cluster.broker_addr(), test)


def test_priority_messages_over_remoting_are_popped_highest_first(cluster: Cluster):
    """Messages with a priority (our client's Message.of(priority=...), the 5.4 property), all
    sent to queue 0 of a PRIORITY topic: the broker places each in its priority's queue, and a
    pop of every queue takes the highest priority first, each priority in send order."""
    async def test(wire: BrokerWire):
        header = CreateTopicRequestHeader("PopPrio", "TBW102", 3, 3, 6, "SINGLE_TAG", attributes="+message.type=PRIORITY")
        assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
        for i in range(12):  # priorities 0-3 on 3 queues: 3 counts as the highest, 2
            resp = await wire.send(Message.of("PopPrio", f"p{i % 4}-{i:02d}".encode(), priority=i % 4), queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        _, found = await wire.pop("G-prio", "PopPrio", max_nums=32)
        got = [(m.queue_id, m.body.decode()) for m, _ in found]
        expected = [(2, f"p{i % 4}-{i:02d}") for i in range(12) if i % 4 >= 2]
        expected += [(1, f"p1-{i:02d}") for i in range(1, 12, 4)] + [(0, f"p0-{i:02d}") for i in range(0, 12, 4)]
        assert got == expected
        with pytest.raises(ValueError, match="cannot go with a message group"):
            Message.of("PopPrio", b"x", priority=1, sharding_key="g")
        with pytest.raises(ValueError, match="0 or more"):
            Message.of("PopPrio", b"x", priority=-1)
    with_wire(cluster.broker_addr(), test)


def test_in_flight_messages_survive_a_crash_and_a_restart(cluster: Cluster):
    state = cluster.store_dir(0) / "config" / "popState.json"

    async def pop_and_leave(wire: BrokerWire):
        await send_all(wire, "PopD", [b"d0", b"d1"], queue_id=2)
        _, found = await wire.pop("G-d", "PopD", invisible_ms=1500)
        assert [m.body for m, _ in found] == [b"d0", b"d1"]
        assert (await wire.ack("G-d", "PopD", found[0][1])).code == ResponseCode.SUCCESS

    def persisted() -> bool:
        doc = json.loads(state.read_text()) if state.exists() else {}
        return [e[2:4] for e in doc.get("inFlight", []) if e[0] == "G-d"] == [[2, 1]]

    async def comes_back(wire: BrokerWire):
        [(m, h)] = await pop_until(wire, "G-d", "PopD", 1)
        assert (m.body, m.reconsume_times) == (b"d1", 1)
        assert (await wire.ack("G-d", "PopD", h)).code == ResponseCode.SUCCESS
        assert (await wire.pop("G-d", "PopD", poll_ms=300))[0].code == PopResponseCode.POLLING_TIMEOUT

    with_wire(cluster.broker_addr(), pop_and_leave)
    wait_for(persisted, 10, "the in-flight message in popState.json")
    cluster.kill_broker(0)
    cluster.start_broker(0)
    with_wire(cluster.broker_addr(), comes_back)

    async def pop_then_stop(wire: BrokerWire):
        await send_all(wire, "PopD", [b"d2"], queue_id=2)
        _, found = await wire.pop("G-d", "PopD", invisible_ms=1000)
        assert [m.body for m, _ in found] == [b"d2"]
    with_wire(cluster.broker_addr(), pop_then_stop)
    cluster.restart_broker(0)

    async def back_after_restart(wire: BrokerWire):
        [(m, _)] = await pop_until(wire, "G-d", "PopD", 1)
        assert (m.body, m.reconsume_times) == (b"d2", 1)
    with_wire(cluster.broker_addr(), back_after_restart)


def test_waiting_pops_are_capped_and_released_promptly_at_shutdown(tmp_path) -> None:
    """``maxPopPollingSize`` pops wait at once; one more that finds nothing is refused POLLING_FULL
    at once. A broker stopping answers its waiting pops SERVICE_NOT_AVAILABLE at once, long
    before their poll time."""
    with Cluster(tmp_path, broker_args=["--maxPopPollingSize=2"]) as capped:
        async def test(wire: BrokerWire) -> None:
            await send_all(wire, "PopCap", [b"before"])  # the topic; popped (hidden) first, so pops find nothing
            assert [m.body for m, _ in await pop_until(wire, "G-cap", "PopCap", 1)] == [b"before"]
            held = [asyncio.ensure_future(wire.pop("G-cap", "PopCap", poll_ms=60_000)) for _ in range(2)]
            await asyncio.sleep(0)  # not a wait: lets both tasks write their requests before the next one

            async def full():
                resp, found = await wire.pop("G-cap", "PopCap", poll_ms=200)
                assert not found and resp.code in (PopResponseCode.POLLING_FULL, PopResponseCode.POLLING_TIMEOUT)
                return resp if resp.code == PopResponseCode.POLLING_FULL else None
            refused = await eventually(full, 20, "a pop past maxPopPollingSize refused")
            assert "maxPopPollingSize" in refused.remark
            assert not any(f.done() for f in held)

            started = time.monotonic()
            stopping = asyncio.ensure_future(asyncio.to_thread(capped.stop_broker, 0))
            answers = await asyncio.wait_for(asyncio.gather(*held), 20)
            assert time.monotonic() - started < 20
            assert [(r.code, found) for r, found in answers] == [(ResponseCode.SERVICE_NOT_AVAILABLE, [])] * 2
            assert all("shutting down" in r.remark for r, _ in answers)
            assert await stopping == 0
        with_wire(capped.broker_addr(), test)
