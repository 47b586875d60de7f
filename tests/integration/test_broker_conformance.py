"""Edge cases of the request processors against what Apache RocketMQ 4.9.7's broker answers
(broker/.../processor/*.java, ConsumerOffsetManager, DefaultMessageStore.getMessage), one test
per case, in raw requests to a real broker. Where Skiff answers differently on purpose,
docs/protocol.md ("Deliberate differences from the reference broker") says why and the test
pins Skiff's answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.bodies.client_calls import ResetOffsetBody
from skiff.protocol.bodies.consumer import ConsumeStats, ConsumerIdList
from skiff.protocol.bodies.heartbeat import ExpressionType, SubscriptionData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader, GetConsumeStatsRequestHeader
from skiff.protocol.headers.client_calls import ResetOffsetRequestHeader
from skiff.protocol.headers.consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from skiff.protocol.headers.query import ViewMessageRequestHeader
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.protocol.message_codec import decode_stored_messages
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, consumer, with_wire

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
RETENTION = ["--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}", "--cleanResourceInterval=100",
             "--mappedFileSizeCommitLog=65536"]
"""A broker that deletes every CommitLog file but the newest at once: queues whose minimum moves past 0."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("conformance")) as c:
        yield c


async def commit(wire: BrokerWire, group: str, topic: str, queue_id: int, offset: int) -> None:
    resp = await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                           UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset).to_ext())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def query(wire: BrokerWire, group: str, topic: str, queue_id: int) -> tuple[int, int | None]:
    """(code, offset) of QUERY_CONSUMER_OFFSET; offset None when the answer has none."""
    resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                           QueryConsumerOffsetRequestHeader(group, topic, queue_id).to_ext())
    offset = resp.ext("offset")
    return resp.code, None if offset is None else int(offset)


async def queue_offset(wire: BrokerWire, code: int, topic: str, queue_id: int) -> int:
    resp = await wire.call(code, QueueRequestHeader(topic, queue_id).to_ext())
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext("offset"))


def pulled(resp) -> tuple[int, int, int, int]:
    return (resp.code, int(resp.ext("nextBeginOffset")), int(resp.ext("minOffset")), int(resp.ext("maxOffset")))


# ------------------------------------------------------------ consumer offsets

def test_stored_offset_below_zero_reads_as_no_offset_on_a_queue_from_zero(cluster: Cluster):
    """Some clients persist -1 for "nothing consumed yet": ConsumerManageProcessor answers it as
    it answers a missing offset, 0 while the queue still starts at 0, so nothing sent is skipped."""
    async def test(wire: BrokerWire):
        await wire.send(Message.of("CF-minus", b"m0"), queue_id=0)
        await commit(wire, "CG-minus", "CF-minus", 0, -1)
        assert await query(wire, "CG-minus", "CF-minus", 0) == (ResponseCode.SUCCESS, 0)
        await commit(wire, "CG-minus", "CF-minus", 0, -7)
        assert await query(wire, "CG-minus", "CF-minus", 0) == (ResponseCode.SUCCESS, 0)
        await commit(wire, "CG-minus", "CF-minus", 0, 1)  # a real offset after -1 is kept as is
        assert await query(wire, "CG-minus", "CF-minus", 0) == (ResponseCode.SUCCESS, 1)
    with_wire(cluster.broker_addr(), test)


def test_stored_offset_below_zero_is_not_found_once_the_queue_moved_on(tmp_path: Path):
    """The same -1 on a queue whose first message is gone: QUERY_NOT_FOUND, and the client's
    consumeFromWhere decides where to start (what a missing offset gets)."""
    with Cluster(tmp_path / "retention", broker_args=RETENTION) as retaining:
        async def test(wire: BrokerWire):
            for _ in range(160):  # 160 KiB: two and a half CommitLog files
                assert (await wire.send(Message.of("CF-gone", b"r" * 1000), queue_id=0)).code == ResponseCode.SUCCESS

            async def moved() -> int:
                return await queue_offset(wire, RequestCode.GET_MIN_OFFSET, "CF-gone", 0)
            await eventually(moved, 60, "retention deleting the first CommitLog files")
            await commit(wire, "CG-gone", "CF-gone", 0, -1)
            code, offset = await query(wire, "CG-gone", "CF-gone", 0)
            assert code == ResponseCode.QUERY_NOT_FOUND and offset is None
            assert (await query(wire, "CG-never", "CF-gone", 0))[0] == ResponseCode.QUERY_NOT_FOUND
        with_wire(retaining.broker_addr(), test)


def test_offsets_of_absent_groups_unknown_topics_and_queue_ids_out_of_range(cluster: Cluster):
    """Offsets are not checked against groups, topics or queue counts (ConsumerOffsetManager
    stores what it is given); a query with nothing stored on an empty or unknown queue answers 0."""
    async def test(wire: BrokerWire):
        await wire.send(Message.of("CF-range", b"x"), queue_id=0)
        await commit(wire, "CG-nobody", "CF-range", 99, 5)
        assert await query(wire, "CG-nobody", "CF-range", 99) == (ResponseCode.SUCCESS, 5)
        assert await query(wire, "CG-nobody", "CF-range", 98) == (ResponseCode.SUCCESS, 0)
        assert await query(wire, "CG-nobody", "CF-no-such-topic", 0) == (ResponseCode.SUCCESS, 0)
        for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
            assert await queue_offset(wire, code, "CF-no-such-topic", 0) == 0
            assert await queue_offset(wire, code, "CF-range", 99) == 0
        members = await wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                  GetConsumerListByGroupRequestHeader("CG-nobody").to_ext())
        assert members.code == ResponseCode.SYSTEM_ERROR and "CG-nobody" in members.remark
    with_wire(cluster.broker_addr(), test)


# -------------------------------------------------------------------- sending

def test_send_queue_ids_out_of_range(cluster: Cluster):
    """AbstractSendMessageProcessor.msgCheck: a queue id at or past max(read, write) queues is
    SYSTEM_ERROR; a negative one means "any" and gets a random write queue."""
    async def test(wire: BrokerWire):
        await wire.send(Message.of("CF-send-range", b"x"), queue_id=0)  # auto-created with 4 queues
        refused = await wire.send(Message.of("CF-send-range", b"x"), queue_id=4)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert "queueId 4 is illegal: topic CF-send-range has 4 write and 4 read queues" in refused.remark
        anywhere = await wire.send(Message.of("CF-send-range", b"x"), queue_id=-1)
        assert anywhere.code == ResponseCode.SUCCESS and 0 <= int(anywhere.ext("queueId")) < 4
    with_wire(cluster.broker_addr(), test)


def test_zero_length_body_is_stored_and_pulled(cluster: Cluster):
    """The broker stores an empty body (CommitLog writes a body length of 0); only clients refuse it."""
    async def test(wire: BrokerWire):
        sent = await wire.send(Message.of("CF-empty", b"", tags="T"), queue_id=0)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        [msg] = await wire.pull_messages("CG-empty", "CF-empty", 0)
        assert msg.body == b"" and msg.tags == "T"
    with_wire(cluster.broker_addr(), test)


def test_empty_tags_match_only_everything(cluster: Cluster):
    """TAGS="" hashes to tag code 0, as no tag does: `*` takes it, a tag expression does not."""
    async def test(wire: BrokerWire):
        for body, tags in ((b"empty", ""), (b"none", None), (b"tagged", "A")):
            assert (await wire.send(Message.of("CF-tags", body, tags=tags), queue_id=0)).code == ResponseCode.SUCCESS
        every = await wire.pull_messages("CG-tags", "CF-tags", 0)
        assert [m.body for m in every] == [b"empty", b"none", b"tagged"]
        only_a = await wire.pull_messages("CG-tags", "CF-tags", 0, subscription="A")
        assert [m.body for m in only_a] == [b"tagged"]
    with_wire(cluster.broker_addr(), test)


def test_unknown_sys_flag_bits_are_kept_and_host_bits_follow_the_connection(cluster: Cluster):
    """Bits the broker does not know are stored as sent; the host-length bits (BORNHOST_V6,
    STOREHOST_V6) describe the stored record, so they follow the real addresses."""
    unknown = 1 << 12
    async def test(wire: BrokerWire):
        lying = unknown | int(MessageSysFlag.BORNHOST_V6) | int(MessageSysFlag.STOREHOST_V6)
        sent = await wire.send(Message.of("CF-flags", b"flags"), queue_id=0, sys_flag=lying)
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        resp = await wire.pull("CG-flags", "CF-flags", 0, 0)
        [msg] = decode_stored_messages(resp.body)
        assert msg.body == b"flags" and msg.born_host.startswith("127.0.0.1:")
        assert msg.sys_flag & unknown and not msg.sys_flag & (MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
    with_wire(cluster.broker_addr(), test)


# -------------------------------------------------------------------- pulling

def test_pull_offsets_below_min_past_max_and_on_unknown_queues(cluster: Cluster):
    """DefaultMessageStore.getMessage and PullMessageProcessor: below the minimum is
    PULL_OFFSET_MOVED to the minimum; one past the end PULL_NOT_FOUND at the same offset;
    further PULL_OFFSET_MOVED to the maximum (4.9.7 and 5.x); a queue id outside the topic's
    read queues SYSTEM_ERROR; an unknown topic TOPIC_NOT_EXIST."""
    async def test(wire: BrokerWire):
        for i in range(3):
            await wire.send(Message.of("CF-pull", f"p{i}"), queue_id=1)
        assert pulled(await wire.pull("CG-pull", "CF-pull", 1, -1)) == (ResponseCode.PULL_OFFSET_MOVED, 0, 0, 3)
        assert pulled(await wire.pull("CG-pull", "CF-pull", 1, 3)) == (ResponseCode.PULL_NOT_FOUND, 3, 0, 3)
        assert pulled(await wire.pull("CG-pull", "CF-pull", 1, 1000)) == (ResponseCode.PULL_OFFSET_MOVED, 3, 0, 3)
        assert pulled(await wire.pull("CG-pull", "CF-pull", 0, 0)) == (ResponseCode.PULL_NOT_FOUND, 0, 0, 0)
        assert pulled(await wire.pull("CG-pull", "CF-pull", 0, 2)) == (ResponseCode.PULL_OFFSET_MOVED, 0, 0, 0)
        for queue_id in (-1, 4):
            assert (await wire.pull("CG-pull", "CF-pull", queue_id, 0)).code == ResponseCode.SYSTEM_ERROR
        assert (await wire.pull("CG-pull", "CF-no-topic", 0, 0)).code == ResponseCode.TOPIC_NOT_EXIST
    with_wire(cluster.broker_addr(), test)


# --------------------------------------------- send-back, lookups, transactions

def test_send_back_of_a_missing_offset_and_with_a_negative_level(cluster: Cluster):
    """asyncConsumerSendMsgBack: an offset with no message is SYSTEM_ERROR; a negative delay level
    sends the message straight to the group's DLQ, whatever its reconsume count."""
    async def test(wire: BrokerWire):
        sent = await wire.send(Message.of("CF-back", b"poison"), queue_id=0)
        phys = decode_offset_msg_id(sent.ext("msgId")).physical_offset
        missing = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK,
                                  ConsumerSendMsgBackRequestHeader(phys + 10**9, "CG-back", 0).to_ext())
        assert missing.code == ResponseCode.SYSTEM_ERROR and str(phys + 10**9) in missing.remark
        dead = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK,
                               ConsumerSendMsgBackRequestHeader(phys, "CG-back", -1).to_ext())
        assert dead.code == ResponseCode.SUCCESS, dead.remark
        [msg] = await wire.pull_messages("CG-dlq-reader", "%DLQ%CG-back", 0)
        assert msg.body == b"poison" and msg.reconsume_times == 1 and msg.properties["RETRY_TOPIC"] == "CF-back"
    with_wire(cluster.broker_addr(), test)


def test_lookups_of_what_is_not_there(cluster: Cluster):
    """VIEW_MESSAGE_BY_ID past the CommitLog: SYSTEM_ERROR; SEARCH_OFFSET_BY_TIMESTAMP on an
    unknown queue: 0; GET_EARLIEST_MSG_STORETIME of an empty or unknown queue: -1;
    END_TRANSACTION for an offset holding no half message: SYSTEM_ERROR."""
    async def test(wire: BrokerWire):
        view = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(2**40).to_ext())
        assert view.code == ResponseCode.SYSTEM_ERROR and view.body == b""
        search = await wire.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                 SearchOffsetRequestHeader("CF-nowhere", 0, 1).to_ext())
        assert (search.code, search.ext("offset")) == (ResponseCode.SUCCESS, "0")
        earliest = await wire.call(RequestCode.GET_EARLIEST_MSG_STORETIME, QueueRequestHeader("CF-nowhere", 0).to_ext())
        assert (earliest.code, earliest.ext("timestamp")) == (ResponseCode.SUCCESS, "-1")
        end = await wire.call(RequestCode.END_TRANSACTION, EndTransactionRequestHeader(
            "PG-none", 0, 2**40, int(MessageSysFlag.TRANSACTION_COMMIT), "00").to_ext())
        assert end.code == ResponseCode.SYSTEM_ERROR
    with_wire(cluster.broker_addr(), test)


def test_heartbeat_with_a_subscription_the_broker_cannot_serve(cluster: Cluster):
    """Deliberate difference: Java answers such a heartbeat SUCCESS; Skiff registers the member
    as Java does but answers why it will get nothing (docs/protocol.md)."""
    async def test(wire: BrokerWire):
        sql = SubscriptionData("CF-hb", "a > 1", expression_type=ExpressionType.SQL92)
        data = dataclasses.replace(consumer("CG-hb", "CF-hb"), subscription_data_set=(sql,))
        resp = await wire.heartbeat("client-hb", consumers=[data])
        assert resp.code == ResponseCode.SYSTEM_ERROR and "set enablePropertyFilter=true" in resp.remark
        members = await wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                  GetConsumerListByGroupRequestHeader("CG-hb").to_ext())
        assert members.code == ResponseCode.SUCCESS
        assert ConsumerIdList.from_json(members.body).consumer_id_list == ("client-hb",)
    with_wire(cluster.broker_addr(), test)


def test_consume_stats_cover_read_queues_and_count_a_negative_offset_as_zero(cluster: Cluster):
    """getConsumeStats: one row per read queue of each topic the group has offsets on; a stored
    offset below 0 is reported as 0 (so the lag is the whole queue, not one more)."""
    async def test(wire: BrokerWire):
        created = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                  CreateTopicRequestHeader("CF-stats", "TBW102", 3, 2, 6, "SINGLE_TAG").to_ext())
        assert created.code == ResponseCode.SUCCESS, created.remark
        for _ in range(2):
            await wire.send(Message.of("CF-stats", b"s"), queue_id=1)
        await commit(wire, "CG-stats", "CF-stats", 1, -1)
        resp = await wire.call(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("CG-stats").to_ext())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        table = {mq.queue_id: (w.broker_offset, w.consumer_offset) for mq, w in
                 ConsumeStats.from_json(resp.body).offset_table.items()}
        assert table == {0: (0, 0), 1: (2, 0), 2: (0, 0)}
    with_wire(cluster.broker_addr(), test)


def test_reset_offset_of_an_offline_group_with_a_negative_offset(cluster: Cluster):
    """Deliberate difference: Java's broker refuses a reset for a queue the group has no offset on
    and only tells online consumers (CONSUMER_NOT_ONLINE otherwise); Skiff commits the new offsets
    itself, a stored -1 counting as no offset, so even a non-forced reset takes effect."""
    async def test(wire: BrokerWire):
        for _ in range(3):
            await wire.send(Message.of("CF-reset", b"r"), queue_id=0)
        await commit(wire, "CG-reset", "CF-reset", 0, -1)
        resp = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                               ResetOffsetRequestHeader("CF-reset", "CG-reset", -1, False).to_ext())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        table = {mq.queue_id: off for mq, off in ResetOffsetBody.from_json(resp.body).offset_table.items()}
        assert table[0] == 3
        assert await query(wire, "CG-reset", "CF-reset", 0) == (ResponseCode.SUCCESS, 3)
    with_wire(cluster.broker_addr(), test)
