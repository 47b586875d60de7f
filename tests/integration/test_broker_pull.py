"""Pulls from a real broker: status codes and next offsets (RocketMQ's PullMessageProcessor),
tag and SQL92 filtering, commit offsets, transfer limits and long polling."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.message_codec import decode_stored_messages
from skiff.testing.cluster import Cluster
from skiff.testing.processes import start_broker
from skiff.testing.wire import BrokerWire, consumer, with_wire
from skiff.transport.loop import run_coroutine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("pull"), broker_args=["--maxTransferCountOnMessageInMemory=5"]) as c:
        yield c


def offsets(resp) -> tuple[int, int, int, int]:
    return (resp.code, int(resp.ext("nextBeginOffset")), int(resp.ext("minOffset")), int(resp.ext("maxOffset")))


def test_status_codes_and_next_offsets(cluster: Cluster):
    async def test(wire: BrokerWire):
        assert (await wire.pull("G", "Statuses", 0, 0)).code == ResponseCode.TOPIC_NOT_EXIST
        await wire.send(Message.of("Statuses", b"m0"), queue_id=1)
        empty = await wire.pull("G", "Statuses", 0, 0)
        assert offsets(empty) == (ResponseCode.PULL_NOT_FOUND, 0, 0, 0) and empty.body == b""
        assert offsets(await wire.pull("G", "Statuses", 0, 5)) == (ResponseCode.PULL_OFFSET_MOVED, 0, 0, 0)
        for i in range(1, 8):
            await wire.send(Message.of("Statuses", f"m{i}"), queue_id=1)
        found = await wire.pull("G", "Statuses", 1, 0, max_nums=3)
        assert offsets(found) == (ResponseCode.SUCCESS, 3, 0, 8)
        assert [m.body for m in decode_stored_messages(found.body)] == [b"m0", b"m1", b"m2"]
        limited = await wire.pull("G", "Statuses", 1, 0, max_nums=32)
        assert offsets(limited)[:2] == (ResponseCode.SUCCESS, 5)  # maxTransferCountOnMessageInMemory=5
        assert offsets(await wire.pull("G", "Statuses", 1, 8)) == (ResponseCode.PULL_NOT_FOUND, 8, 0, 8)
        assert offsets(await wire.pull("G", "Statuses", 1, 20)) == (ResponseCode.PULL_OFFSET_MOVED, 8, 0, 8)
        bad_queue = await wire.pull("G", "Statuses", 9, 0)
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queue 9 of topic Statuses is not readable" in bad_queue.remark
        missing = await wire.pull("G", "NoSuchTopic", 0, 0)
        assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic NoSuchTopic does not exist on this broker")
    with_wire(cluster.broker_addr(), test)


def test_tag_filtering_and_the_subscription_a_heartbeat_registered(cluster: Cluster):
    async def test(wire: BrokerWire):
        tags = ["A", "B", "C", "A", None, "B"]
        for i, tag in enumerate(tags):
            await wire.send(Message.of("Tagged", f"t{i}", tags=tag))
        got = await wire.pull_messages("G-tags", "Tagged", 0, subscription="A || C")
        assert [(m.body, m.tags) for m in got] == [(b"t0", "A"), (b"t2", "C"), (b"t3", "A")]
        none = await wire.pull("G-tags", "Tagged", 0, 0, subscription="Z")
        assert offsets(none)[:2] == (ResponseCode.PULL_RETRY_IMMEDIATELY, 6)  # all six scanned, none matched

        unknown = await wire.pull("G-nobody", "Tagged", 0, 0, subscription=None)
        assert unknown.code == ResponseCode.SUBSCRIPTION_NOT_EXIST and "send a heartbeat first" in unknown.remark
        await wire.heartbeat("client-1", consumers=[consumer("G-heart", "Tagged", expression="B")])
        via_heartbeat = await wire.pull_messages("G-heart", "Tagged", 0, subscription=None)
        assert [m.body for m in via_heartbeat] == [b"t1", b"t5"]

        bad = await wire.pull("G-tags", "Tagged", 0, 0, subscription="||")
        assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "names no tag" in bad.remark
        sql = await wire.pull("G-sql", "Tagged", 0, 0, subscription="a > 1", expression_type="SQL92")
        assert sql.code == ResponseCode.SYSTEM_ERROR and "set enablePropertyFilter=true" in sql.remark
    with_wire(cluster.broker_addr(), test)


def test_sql92_filtering_when_enabled(tmp_path: Path):
    with start_broker(tmp_path, "", "--enablePropertyFilter=true") as broker:
        async def test(wire: BrokerWire):
            for i in range(6):
                await wire.send(Message.of("Orders", f"o{i}", tags="EU" if i % 2 else "US", properties={"amount": str(i * 10)}))
            got = await wire.pull_messages("G", "Orders", 0, subscription="amount >= 20 AND TAGS = 'EU'",
                                           expression_type="SQL92")
            assert [m.body for m in got] == [b"o3", b"o5"]
            bad = await wire.pull("G", "Orders", 0, 0, subscription="amount >", expression_type="SQL92")
            assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and bad.remark
        with_wire(broker.addr, test)


def test_commit_offset_flag_stores_the_offset(cluster: Cluster):
    async def test(wire: BrokerWire):
        await wire.send(Message.of("Commits", b"x"))
        await wire.pull("G-commit", "Commits", 0, 1, commit_offset=1)
        resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                               {"consumerGroup": "G-commit", "topic": "Commits", "queueId": 0})
        assert (resp.code, resp.ext("offset")) == (ResponseCode.SUCCESS, "1")
    with_wire(cluster.broker_addr(), test)


async def pulls_held(wire: BrokerWire, count: int, deadline_s: float = 10.0) -> None:
    """Wait until the broker holds ``count`` long-polling pulls (its runtime info's pullsHeld)."""
    end = time.monotonic() + deadline_s
    while True:
        table = KVTable.from_json((await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
        if int(table["pullsHeld"]) >= count:
            return
        assert time.monotonic() < end, f"no {count} held pulls within {deadline_s} s: {table['pullsHeld']}"
        await asyncio.sleep(0.02)


def test_long_polling_answers_on_arrival_and_at_the_timeout(cluster: Cluster):
    async def test(wire: BrokerWire):
        sender = BrokerWire(cluster.broker_addr())
        try:
            await sender.send(Message.of("LongPoll", b"first"))
            started = time.monotonic()
            held = asyncio.ensure_future(wire.pull("G-lp", "LongPoll", 0, 1, suspend_ms=15_000))
            await pulls_held(sender, 1)
            assert not held.done()
            sent_at = time.monotonic()
            await sender.send(Message.of("LongPoll", b"second"))
            resp = await asyncio.wait_for(held, 10)
            waited_after_send = time.monotonic() - sent_at
            assert resp.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_stored_messages(resp.body)] == [b"second"]
            assert waited_after_send < 1.0, waited_after_send
            assert time.monotonic() - started < 10

            started = time.monotonic()
            timeout = await wire.pull("G-lp", "LongPoll", 0, 2, suspend_ms=600)
            elapsed = time.monotonic() - started
            assert offsets(timeout)[:2] == (ResponseCode.PULL_NOT_FOUND, 2)
            assert 0.55 <= elapsed < 5, elapsed
        finally:
            await sender.close()
    with_wire(cluster.broker_addr(), test)


def test_held_pulls_are_answered_when_the_broker_stops(tmp_path: Path):
    broker = start_broker(tmp_path, "")
    async def main():
        wire = BrokerWire(broker.addr)
        try:
            await wire.send(Message.of("Stopping", b"x"))
            held = asyncio.ensure_future(wire.pull("G", "Stopping", 0, 1, suspend_ms=30_000))
            await pulls_held(wire, 1)
            started = time.monotonic()
            await asyncio.get_running_loop().run_in_executor(None, broker.stop)
            resp = await asyncio.wait_for(held, 10)
            assert (resp.code, resp.remark) == (ResponseCode.SERVICE_NOT_AVAILABLE, "the broker broker-a is shutting down")
            assert time.monotonic() - started < 10
        finally:
            await wire.close()
    run_coroutine(main())
    assert "skiff broker stopped" in broker.output
