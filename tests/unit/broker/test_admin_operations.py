"""The admin operations over a real store and the broker's real tables, with a clock that moves
only when told: each outcome and each refusal is a value, asserted as the operation returns
it (the remoting adapters that encode them are covered by tests/integration/test_admin.py,
test_timer_admin.py, test_compaction.py and the dashboard's API tests)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from skiff.broker.auth.model import Acl, PolicyType, Resource, User, UserType
from skiff.broker.auth.store import AuthStore
from skiff.broker.clients import ClientManager
from skiff.broker.compaction import CompactionService
from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.grpc.clients import GrpcClients
from skiff.broker.grpc.lite import LiteTopics
from skiff.broker.grpc.renewal import Renewals
from skiff.broker.locks import RebalanceLockManager
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations import (
    LATEST,
    BrokerInfoOperation,
    CompactionOperation,
    ConnectionsOperation,
    ConsumeStatsOperation,
    ConsumeStatsRequest,
    Gate,
    GroupDeletion,
    GroupsOperation,
    Heartbeat,
    KeyQuery,
    Leaving,
    LockRequest,
    LocksOperation,
    MembershipOperation,
    MessagesOperation,
    OffsetReset,
    OffsetResetOperation,
    OffsetsOperation,
    PopOperation,
    Refusal,
    TimerStateOperation,
    TopicChange,
    TopicsOperation,
    TopicStatsOperation,
)
from skiff.broker.operations.auth import AclDeletion, AuthAdminOperation, UserChange
from skiff.broker.operations.tier import NO_TIER, TierOperation
from skiff.broker.tier.setup import tier_service
from skiff.broker.operations.timer import NO_DELAY_OFFSETS, NOT_RUNNING
from skiff.broker.ha.role import Role
from skiff.broker.pop.service import PopService
from skiff.broker.redirect import DelayPolicy
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import TopicConfigManager
from skiff.broker.writer import MessageWriter
from skiff.common.clock import ManualClock
from skiff.common.message import MessageQueue
from skiff.common.stored_message import decode_record
from skiff.tier.backends import TierError
from skiff.protocol.bodies.admin import SubscriptionGroupConfig, TopicOffset, TopicStatsTable
from skiff.protocol.bodies.client_calls import ResetOffsetBody
from skiff.protocol.bodies.consumer import OffsetWrapper
from skiff.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.codes import LanguageCode, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.client_calls import ResetOffsetRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.store import MessageStore, PutResult
from skiff.store.timer import TimerService
from skiff.transport import RemotingClient, RemotingServer
from skiff.transport.connection import CloseReason, Connection
from tests.unit.store.conftest import STORE_HOST, make_config, message
from tests.unit.store.timer.conftest import TIMER, parked

T0 = 1_700_000_040_000
BROKER = "broker-a"


class Broker:
    """The tables and the store the admin operations work on, and the operations themselves."""

    def __init__(self, root: Path, clock: ManualClock, **config: object) -> None:
        self.clock = clock
        self.config = BrokerConfig(broker_name=BROKER, **config)  # type: ignore[arg-type]
        self.store_config = make_config(root, **TIMER)
        self.store = MessageStore(self.store_config, store_host=STORE_HOST, clock=clock)
        self.store.start()
        self.topics = TopicConfigManager(self.config, str(root), clock, schedule_queue_nums=19)
        self.topics.load()
        self.groups_table = SubscriptionGroupManager(self.config, str(root), clock)
        self.offsets_table = ConsumerOffsetManager(str(root))
        self.clients = ClientManager(clock, 120_000)
        self.pop = PopService(self.config, self.store, self.topics, self.groups_table, self.offsets_table,
                              MessageWriter(DelayPolicy((1000,), 10_000), clock), clock, str(root))
        self.gate = Gate(self.config, Role.of(self.config), self.topics, self.groups_table)
        self.offsets = OffsetsOperation(self.store, self.offsets_table)
        self.groups = GroupsOperation(self.groups_table, self.offsets_table)
        self.stats = ConsumeStatsOperation(self.config, self.store, self.gate, self.offsets_table, self.clients,
                                           self.pop)
        self.reset = OffsetResetOperation(self.config, self.gate, self.offsets, self.clients)
        self.connections = ConnectionsOperation(self.clients)
        self.membership = MembershipOperation(self.config, self.clients, self.groups, self.topics)
        self.locks = LocksOperation(RebalanceLockManager(clock, 60_000))
        self.messages = MessagesOperation(self.store)
        self.topic_stats = TopicStatsOperation(self.config, self.gate, self.offsets)
        self.timer: TimerService | None = None
        self.timer_state = TimerStateOperation(lambda: self.timer, self.store_config.timer_slot_ms,
                                               self.store_config.timer_precision_ms, (1000, 5000))
        self.topics_op = TopicsOperation(self.config, self.store, self.topics, self.offsets_table, _registered,
                                         self.gate)
        self.broker_info = BrokerInfoOperation(self.config, self.store_config, self.topics,
                                               BrokerStats(self.config, self.store, clock, Role.of(self.config)))
        self.compaction = CompactionOperation(self.gate, CompactionService(self.store, self.topics,
                                                                           self.store_config, clock))

    def topic(self, name: str, queues: int = 2, **attributes: str) -> TopicConfig:
        tc = TopicConfig(name, queues, queues, attributes=attributes)
        self.topics.put(tc)
        return tc

    def put(self, topic: str, queue_id: int, n: int, **kwargs: str) -> list[PutResult]:
        results = [self.store.put_message(message(i, topic=topic, queue_id=queue_id, **kwargs)) for i in range(n)]
        assert all(r.ok for r in results)
        wait_dispatched(self.store, results[-1])
        return results

    def consumer(self, conn: Connection, group: str, *topics: str, client_id: str = "c-1",
                 language: str = "JAVA", expression: str = "*", kind: ExpressionType = ExpressionType.TAG) -> Refusal | None:
        data = ConsumerData(group, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                            tuple(SubscriptionData(t, expression, expression_type=kind) for t in topics))
        return self.membership.heartbeat(Heartbeat(conn, client_id, language, 401, (data,)))

    def close(self) -> None:
        if self.timer is not None:
            self.timer.stop()
        self.store.shutdown()


async def _registered(wait_s: float) -> None:
    """No NameServer here: a topic change is registered at once."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock)
    yield b
    b.close()


# -- groups -----------------------------------------------------------------------------

def test_a_group_is_created_replaced_listed_and_deleted_with_its_offsets(broker: Broker):
    made = broker.groups.put(SubscriptionGroupConfig("G", retry_max_times=3))
    assert made == SubscriptionGroupConfig("G", retry_max_times=3)
    assert broker.groups.put(SubscriptionGroupConfig("G", consume_enable=False)) == SubscriptionGroupConfig(
        "G", consume_enable=False)
    assert broker.groups.table().subscription_group_table["G"].consume_enable is False
    broker.offsets.commit("G", "T", 0, 7)
    broker.groups.delete(GroupDeletion("G"))
    assert "G" not in broker.groups.table().subscription_group_table
    assert broker.offsets_table.query("G", "T", 0) == 7  # kept without remove_offsets
    broker.groups.put(SubscriptionGroupConfig("G"))
    broker.groups.delete(GroupDeletion("G", remove_offsets=True))
    assert broker.offsets_table.query("G", "T", 0) is None
    broker.groups.delete(GroupDeletion("never-there"))  # no error, as RocketMQ's


@pytest.mark.parametrize(("group", "reason"), [
    (SubscriptionGroupConfig("bad name!"), "bad name!"),
    (SubscriptionGroupConfig("G", retry_queue_nums=-1), "retryQueueNums and retryMaxTimes must not be negative"),
])
def test_a_group_with_a_bad_name_or_settings_is_refused_and_not_stored(broker: Broker, group, reason):
    refusal = broker.groups.put(group)
    assert isinstance(refusal, Refusal)
    assert (refusal.code, refusal.bad_request) == (ResponseCode.SYSTEM_ERROR, True)
    assert reason in refusal.reason
    assert group.group_name not in broker.groups.table().subscription_group_table


def test_a_named_group_is_made_only_when_auto_creation_is_on(tmp_path: Path, clock: ManualClock):
    on = Broker(tmp_path / "on", clock)
    off = Broker(tmp_path / "off", clock, auto_create_subscription_group=False)
    try:
        made = on.groups.ensure("Fresh")
        assert made is not None and made.group_name == "Fresh"
        assert made.retry_max_times == on.config.max_reconsume_times
        assert "Fresh" in on.groups.table().subscription_group_table
        assert off.groups.ensure("Fresh") is None
        assert off.groups.table().subscription_group_table == {}
    finally:
        on.close()
        off.close()


def test_a_grpc_consumer_s_group_is_made_and_read_by_the_same_operation(broker: Broker):
    broker.groups.put(SubscriptionGroupConfig("Known", retry_max_times=4, consume_message_orderly=True))
    grpc = GrpcClients(broker.config, broker.clients, broker.groups, 4 << 20)
    conn = grpc.conn("grpc-client", ("127.0.0.1", 5000))

    def settings(group: str) -> pb.Settings:
        reply = grpc.on_settings(conn, pb.Settings(client_type=pb.PUSH_CONSUMER,
                                                   subscription=pb.Subscription(group=pb.Resource(name=group))))
        return reply.settings

    known = settings("Known")
    assert (known.backoff_policy.max_attempts, known.subscription.fifo) == (5, True)
    fresh = settings("Fresh")
    made = broker.groups.table().subscription_group_table["Fresh"]
    assert made == SubscriptionGroupConfig("Fresh", retry_max_times=broker.config.max_reconsume_times)
    assert (fresh.backoff_policy.max_attempts, fresh.subscription.fifo) == (made.retry_max_times + 1, False)


def test_a_lite_subscription_s_group_is_made_by_the_same_operation_or_not_found(tmp_path: Path, clock: ManualClock):
    """SyncLiteSubscription names a group as a Settings does: made on first sight when
    ``autoCreateSubscriptionGroup`` (`GroupsOperation.ensure`), else CONSUMER_GROUP_NOT_FOUND."""
    def synced(b: Broker, group: str) -> pb.Status:
        grpc = GrpcClients(b.config, b.clients, b.groups, 4 << 20)
        lite = LiteTopics(b.config, b.topics, b.groups, grpc, PopOperation(b.config, b.gate, b.pop),
                          Renewals(b.config, b.pop, clock), clock)
        b.topic("Parent", **{"message.type": "LITE"})
        req = rpc.SyncLiteSubscriptionRequest(action=pb.PARTIAL_ADD, topic=pb.Resource(name="Parent"),
                                              group=pb.Resource(name=group), lite_topic_set=["a"])
        return lite.sync(grpc.conn("lite-client", ("127.0.0.1", 5000)), req).status

    on = Broker(tmp_path / "on", clock)
    off = Broker(tmp_path / "off", clock, auto_create_subscription_group=False)
    try:
        assert synced(on, "LiteG").code == pb.OK
        assert "LiteG" in on.groups.table().subscription_group_table
        refused = synced(off, "LiteG")
        assert (refused.code, refused.message) == (pb.CONSUMER_GROUP_NOT_FOUND, "consumer group LiteG not found")
        assert off.groups.table().subscription_group_table == {}
    finally:
        on.close()
        off.close()


# -- consume stats and offset resets ----------------------------------------------------

def test_consume_stats_of_a_group_per_read_queue(broker: Broker, clock: ManualClock):
    broker.topic("T", queues=2)
    puts = broker.put("T", 0, 5)
    broker.put("T", 1, 2)
    broker.offsets.commit("G", "T", 0, 3)
    broker.offsets.commit("G", "T", 1, -1)  # "nothing consumed" counts as 0
    stats = broker.stats.stats(ConsumeStatsRequest("G"))
    assert not isinstance(stats, Refusal)
    third = puts[2].store_timestamp
    assert third == T0
    assert dict(stats.offset_table) == {
        MessageQueue("T", BROKER, 0): OffsetWrapper(5, 3, third, 3, 0),
        MessageQueue("T", BROKER, 1): OffsetWrapper(2, 0, 0, 0, 0),
    }
    assert stats.total_diff() == 4
    assert broker.stats.stats(ConsumeStatsRequest("G", "T")) == stats
    assert broker.stats.stats(ConsumeStatsRequest("Other")).offset_table == {}


def test_consume_stats_leave_out_a_topic_the_online_members_do_not_subscribe(broker: Broker):
    broker.topic("T")
    broker.topic("U")
    broker.offsets.commit("G", "T", 0, 0)
    broker.offsets.commit("G", "U", 0, 0)
    assert broker.consumer(Connection({}), "G", "U") is None
    stats = broker.stats.stats(ConsumeStatsRequest("G"))
    assert not isinstance(stats, Refusal)
    assert {mq.topic for mq in stats.offset_table} == {"U"}


def test_consume_stats_and_resets_of_a_topic_that_is_not_here_are_refused(broker: Broker):
    expected = Refusal(ResponseCode.TOPIC_NOT_EXIST, "topic Nowhere does not exist on this broker")
    assert broker.stats.stats(ConsumeStatsRequest("G", "Nowhere")) == expected
    assert asyncio.run(broker.reset.reset(OffsetReset("G", "Nowhere", LATEST))) == expected
    assert broker.offsets_table.topics_of("G") == []


def test_a_reset_moves_offsets_back_and_forward_only_when_forced(broker: Broker, clock: ManualClock):
    broker.topic("T", queues=2)
    broker.put("T", 0, 4)
    clock.advance(10_000)
    middle = clock.now_ms()
    broker.put("T", 0, 2)
    broker.put("T", 1, 3)
    broker.offsets.commit("G", "T", 0, 1)
    broker.offsets.commit("G", "T", 1, 2)
    q0, q1 = MessageQueue("T", BROKER, 0), MessageQueue("T", BROKER, 1)

    latest = asyncio.run(broker.reset.reset(OffsetReset("G", "T", LATEST)))
    assert latest == ResetOffsetBody({q0: 1, q1: 2})  # the end is ahead: not moved without force
    forced = asyncio.run(broker.reset.reset(OffsetReset("G", "T", LATEST, force=True)))
    assert forced == ResetOffsetBody({q0: 6, q1: 3})
    assert (broker.offsets_table.query("G", "T", 0), broker.offsets_table.query("G", "T", 1)) == (6, 3)
    back = asyncio.run(broker.reset.reset(OffsetReset("G", "T", middle)))
    assert back == ResetOffsetBody({q0: 4, q1: 0})
    assert broker.offsets_table.query("G", "T", 0) == 4


def test_a_reset_by_time_takes_the_tiers_offset_and_moves_nothing_when_the_tier_cannot_be_read(broker: Broker):
    broker.topic("T", queues=2)
    broker.put("T", 0, 3)
    broker.put("T", 1, 3)
    broker.offsets.commit("G", "T", 0, 2)
    asked: list[tuple[str, int, int, int]] = []

    async def tier(topic: str, queue_id: int, timestamp_ms: int, local: int) -> tuple[int, int] | None:
        asked.append((topic, queue_id, timestamp_ms, local))
        if timestamp_ms == 1:
            raise TierError("the tier file:///t could not be read: gone")
        return (1, timestamp_ms) if queue_id == 0 else None  # queue 1: the disk's answer stands

    broker.offsets.tier_at_time = tier
    body = asyncio.run(broker.reset.reset(OffsetReset("G", "T", 5)))
    assert body == ResetOffsetBody({MessageQueue("T", BROKER, 0): 1, MessageQueue("T", BROKER, 1): 0})
    assert asked == [("T", 0, 5, 0), ("T", 1, 5, 0)]
    with pytest.raises(TierError, match="could not be read"):
        asyncio.run(broker.reset.reset(OffsetReset("G", "T", 1, force=True)))
    assert (broker.offsets_table.query("G", "T", 0), broker.offsets_table.query("G", "T", 1)) == (1, 0)


def test_a_reset_tells_every_live_member_of_the_group(broker: Broker):
    broker.topic("T", queues=1)
    broker.put("T", 0, 3)

    async def main() -> None:
        told: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        server = RemotingServer("127.0.0.1", 0, {})
        client = RemotingClient({RequestCode.RESET_CONSUMER_CLIENT_OFFSET: lambda conn, req: told.put_nowait(req)})
        await server.start()
        try:
            await client.connection(f"127.0.0.1:{server.port}")
            deadline = time.monotonic() + 10
            while not server.connections:
                assert time.monotonic() < deadline, "the loopback connection was not accepted"
                await asyncio.sleep(0.01)
            assert broker.consumer(server.connections[0], "G", "T") is None
            body = await broker.reset.reset(OffsetReset("G", "T", LATEST, force=True))
            req = await asyncio.wait_for(told.get(), 10)
            assert ResetOffsetRequestHeader.from_ext(req.ext_fields) == ResetOffsetRequestHeader("T", "G", LATEST, True)
            assert ResetOffsetBody.from_json(req.body) == body == ResetOffsetBody({MessageQueue("T", BROKER, 0): 3})
            assert req.is_oneway
        finally:
            await client.close()
            await server.stop(1.0)

    asyncio.run(main())


# -- clients: membership, connections, locks --------------------------------------------

def test_a_heartbeat_registers_its_consumers_with_their_group_and_retry_topic(broker: Broker):
    conn = Connection({})
    assert broker.consumer(conn, "G", "T", client_id="c-2", language="CPP") is None
    producer = Heartbeat(conn, "c-2", "CPP", 401, producer_groups=("PG",))
    assert broker.membership.heartbeat(producer) is None
    assert broker.groups_table.get("G") is not None
    retry = broker.topics.get("%RETRY%G")
    assert retry is not None and (retry.read_queue_nums, retry.perm) == (1, 6)

    connection = broker.connections.consumer_connection("G")
    assert not isinstance(connection, Refusal)
    [member] = connection.connection_set
    assert (member.client_id, member.language, member.version) == ("c-2", LanguageCode.CPP, 401)
    assert set(connection.subscription_table) == {"T"}
    assert connection.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert broker.connections.consumer_ids("G") == ["c-2"]
    producers = broker.connections.producer_connection("PG")
    assert not isinstance(producers, Refusal)
    assert [c.client_id for c in producers.connection_set] == ["c-2"]

    broker.membership.leave(Leaving(conn, producer_group="PG"))
    assert broker.connections.producer_connection("PG") == Refusal(ResponseCode.SYSTEM_ERROR,
                                                                   "no producer of group PG is connected")
    broker.membership.closed(conn, CloseReason.PEER_CLOSED)
    assert broker.connections.consumer_connection("G") == Refusal(ResponseCode.CONSUMER_NOT_ONLINE,
                                                                  "no consumer of group G is connected")
    assert broker.connections.consumer_ids("G") == Refusal(ResponseCode.SYSTEM_ERROR,
                                                           "no consumer of group G is connected")


def test_a_subscription_the_broker_cannot_filter_by_is_refused_but_registered(broker: Broker):
    conn = Connection({})
    sql = broker.consumer(conn, "G", "T", expression="a > 1", kind=ExpressionType.SQL92)
    assert sql == Refusal(ResponseCode.SYSTEM_ERROR, "consumer group G, topic T: this broker does not filter by "
                                                     "SQL92: set enablePropertyFilter=true to allow it")
    assert broker.connections.consumer_ids("G") == ["c-1"]  # registered all the same, as RocketMQ's
    assert broker.membership.check("G", SubscriptionData("T", "a > 1", expression_type=ExpressionType.SQL92)) == sql
    assert broker.membership.check("G", SubscriptionData("T", "A || B")) is None


def test_sql_subscriptions_parse_where_the_broker_filters_by_properties(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock, enable_property_filter=True)
    try:
        assert b.membership.check("G", SubscriptionData("T", "a > 1", expression_type=ExpressionType.SQL92)) is None
        refusal = b.membership.check("G", SubscriptionData("T", "a >", expression_type=ExpressionType.SQL92))
        assert isinstance(refusal, Refusal)
        assert refusal.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert refusal.reason.startswith("consumer group G, topic T: ")
    finally:
        b.close()


def test_queue_locks_belong_to_one_client(broker: Broker, clock: ManualClock):
    q0, q1 = MessageQueue("T", BROKER, 0), MessageQueue("T", BROKER, 1)
    assert broker.locks.lock(LockRequest("G", "c-1", (q0,))) == [q0]
    assert broker.locks.lock(LockRequest("G", "c-2", (q0, q1))) == [q1]
    broker.locks.unlock(LockRequest("G", "c-2", (q0,)))  # not c-2's: stays c-1's
    assert broker.locks.lock(LockRequest("G", "c-2", (q0,))) == []
    broker.locks.unlock(LockRequest("G", "c-1", (q0,)))
    assert broker.locks.lock(LockRequest("G", "c-2", (q0,))) == [q0]


# -- messages, offsets -------------------------------------------------------------------

def test_messages_are_found_by_offset_and_by_key(broker: Broker):
    broker.topic("T")
    [first, second] = [broker.store.put_message(message(i, topic="T", keys=f"order-{i % 2}", uniq=f"U{i}"))
                       for i in range(2)]
    record = broker.messages.view(second.physical_offset)
    assert not isinstance(record, Refusal)
    assert decode_record(record).body == b"message 1"
    assert broker.messages.view(1 << 40) == Refusal(ResponseCode.SYSTEM_ERROR,
                                                    "can not find message by the offset 1099511627776")
    wait_dispatched(broker.store, second)
    found = broker.messages.by_key(KeyQuery("T", "order-0", 10, 0, T0 + 60_000))
    assert [decode_record(r).body for r in found.records] == [b"message 0"]
    assert found.index_offset == broker.store.dispatched_offset and found.index_updated_ms == T0
    by_id = broker.messages.by_key(KeyQuery("T", "U1", 10, 0, T0 + 60_000))
    assert [decode_record(r).body for r in by_id.records] == [b"message 1"]
    none = broker.messages.by_key(KeyQuery("T", "order-9", 10, 0, T0 + 60_000))
    assert none.records == [] and none.index_offset == found.index_offset


def test_a_topic_s_stats_per_write_queue(broker: Broker, clock: ManualClock):
    assert broker.topic_stats.stats("Nowhere") == Refusal(ResponseCode.TOPIC_NOT_EXIST,
                                                          "topic Nowhere does not exist on this broker")
    broker.topic("T", queues=2)
    broker.put("T", 0, 3)
    clock.advance(5_000)
    broker.put("T", 0, 1)
    assert broker.topic_stats.stats("T") == TopicStatsTable({
        MessageQueue("T", BROKER, 0): TopicOffset(0, 4, T0 + 5_000),
        MessageQueue("T", BROKER, 1): TopicOffset(0, 0, 0),
    })


# -- topics and the broker itself --------------------------------------------------------

def test_a_topic_is_read_alone_and_in_the_table_with_its_version(broker: Broker):
    assert broker.topics_op.get("Nowhere") == Refusal(ResponseCode.TOPIC_NOT_EXIST,
                                                      "topic Nowhere does not exist on this broker")
    before = broker.topics_op.table().data_version.counter
    made = asyncio.run(broker.topics_op.put(TopicChange("T", 3, 2, attribute_changes="+cleanup.policy=COMPACTION")))
    assert made == TopicConfig("T", 3, 2, attributes={"cleanup.policy": "COMPACTION"})
    assert broker.topics_op.get("T") == made
    table = broker.topics_op.table()
    assert table.topic_config_table["T"] == made
    assert table.data_version.counter > before
    assert asyncio.run(broker.topics_op.delete("T")) is None
    assert isinstance(broker.topics_op.get("T"), Refusal)
    assert "T" not in broker.topics_op.table().topic_config_table


def test_the_broker_s_runtime_info_and_configuration(broker: Broker, clock: ManualClock):
    broker.topic("T")
    broker.put("T", 0, 2)
    clock.advance(61_000)
    runtime = broker.broker_info.runtime().table
    assert (runtime["msgPutTotalTodayNow"], runtime["runtime"]) == ("2", "[ 0 days, 0 hours, 1 minutes, 1 seconds ]")
    props = broker.broker_info.properties()
    assert (props.properties["brokerName"], props.properties["maxMessageSize"]) == (
        BROKER, str(broker.store_config.max_message_size))
    assert props.version == broker.topics.data_version
    lines = props.text().splitlines()
    assert lines == sorted(lines) and f"brokerName={BROKER}" in lines and len(lines) == len(props.properties)


def test_a_topic_s_tier_state_and_an_upload_or_why_not(tmp_path: Path, clock: ManualClock, broker: Broker,
                                                        monkeypatch: pytest.MonkeyPatch):
    none = TierOperation(broker.gate, None)
    assert asyncio.run(none.status("Nowhere")) == Refusal(ResponseCode.TOPIC_NOT_EXIST,
                                                          "topic Nowhere does not exist on this broker")
    broker.topic("T")
    assert asyncio.run(none.upload("T")) == NO_TIER
    url = (tmp_path / "tier").as_uri()
    tiered = Broker(tmp_path / "tiered", clock, tier_storage_url=url)
    try:
        service = tier_service(tiered.config, tiered.store, tiered.topics, clock)
        assert service is not None
        op = TierOperation(tiered.gate, service)
        tiered.topic("T", queues=1)
        tiered.put("T", 0, 3)
        state = asyncio.run(op.upload("T"))
        assert not isinstance(state, Refusal)
        assert (state.topic, state.url) == ("T", url)
        assert [(q.queue_id, q.local_min_offset, q.local_max_offset) for q in state.queues] == [(0, 0, 3)]
        assert asyncio.run(op.status("T")) == state

        def unreachable(*args: object) -> None:
            raise TierError("bucket unreachable")
        monkeypatch.setattr(service, "status", unreachable)
        assert asyncio.run(op.status("T")) == Refusal(ResponseCode.SYSTEM_ERROR,
                                                      f"tier of T at {url}: bucket unreachable")
    finally:
        tiered.close()


# -- ACL 2.0's users and ACLs ------------------------------------------------------------

def _acl(subject: str, *resources: str) -> Acl:
    return Acl.from_json({"subject": subject, "policies": [{"policyType": "Custom", "entries": [
        {"resource": r, "actions": ["Pub"], "decision": "Allow"} for r in resources]}]})


def test_users_are_made_changed_read_and_deleted_and_only_a_super_caller_touches_super(tmp_path: Path):
    auth = AuthAdminOperation(AuthStore(str(tmp_path)))
    assert auth.create_user(User("root", "root-pw", UserType.SUPER), None) is None  # no AccessKey: let through
    assert auth.create_user(User("app", "app-pw"), "root") is None
    assert auth.create_user(User("app", "again"), "root") == Refusal(ResponseCode.SYSTEM_ERROR,
                                                                      "user 'app' already exists")
    assert auth.create_user(User("boss", "pw", UserType.SUPER), "app") == Refusal(
        ResponseCode.NO_PERMISSION, "only a Super user may create the Super user 'boss'")
    assert auth.update_user(UserChange("app", {"userType": "Super"}), "app") == Refusal(
        ResponseCode.NO_PERMISSION, "only a Super user may change the user 'app' to or from Super")
    assert auth.update_user(UserChange("app", {"password": "new-pw"}), "app") == User("app", "new-pw")
    assert auth.update_user(UserChange("ghost", {"password": "x"}), "root") == Refusal(
        ResponseCode.SYSTEM_ERROR, "user 'ghost' does not exist")
    assert auth.delete_user("root", "app") == Refusal(ResponseCode.NO_PERMISSION,
                                                      "only a Super user may delete the Super user 'root'")
    assert auth.user("root") == User("root", "root-pw", UserType.SUPER)
    assert [u.username for u in auth.users()] == ["app", "root"]
    assert [u.username for u in auth.users("ro")] == ["root"]
    assert auth.delete_user("app", "root") is None
    assert auth.user("app") == Refusal(ResponseCode.SYSTEM_ERROR, "user 'app' does not exist")
    assert auth.delete_user("app", "root") == Refusal(ResponseCode.SYSTEM_ERROR, "user 'app' does not exist")


def test_acls_are_merged_read_filtered_and_deleted_by_entry_or_whole(tmp_path: Path):
    auth = AuthAdminOperation(AuthStore(str(tmp_path)))
    assert auth.put_acl(_acl("User:app", "Topic:a")) == Refusal(
        ResponseCode.SYSTEM_ERROR, "user 'app' does not exist: create the user first")
    auth.create_user(User("app", "pw"), None)
    auth.create_user(User("ops", "pw"), None)
    auth.put_acl(_acl("User:app", "Topic:a"))
    merged = auth.put_acl(_acl("User:app", "Topic:b"))
    assert not isinstance(merged, Refusal)
    keys = [e.resource.key for e in merged.policies[PolicyType.CUSTOM].entries]
    assert sorted(keys) == ["Topic:a", "Topic:b"]
    assert auth.acl("User:app") == merged
    assert auth.acl("User:ops") == Refusal(ResponseCode.SYSTEM_ERROR, "User:ops has no ACL")
    auth.put_acl(_acl("User:ops", "Topic:c"))
    assert [a.subject for a in auth.acls()] == ["User:app", "User:ops"]
    assert [a.subject for a in auth.acls("ops")] == ["User:ops"]
    assert [a.subject for a in auth.acls("", "Topic:b")] == ["User:app"]
    assert auth.delete_acl(AclDeletion("User:app", PolicyType.CUSTOM, Resource.parse("Topic:a"))) is None
    left = auth.acl("User:app")
    assert not isinstance(left, Refusal)
    assert [e.resource.key for e in left.policies[PolicyType.CUSTOM].entries] == ["Topic:b"]
    assert auth.delete_acl(AclDeletion("User:app")) is None
    assert auth.delete_acl(AclDeletion("User:app")) == Refusal(ResponseCode.SYSTEM_ERROR, "User:app has no ACL")
    assert auth.delete_user("ops", None) is None
    assert auth.acls() == []  # a user's ACL goes with the user


def test_a_queue_s_earliest_store_time_and_the_offset_table(broker: Broker, clock: ManualClock):
    broker.topic("T")
    assert broker.offsets.earliest_store_time("T", 0) == -1
    put = broker.store.put_message(message(0, topic="T"))
    wait_dispatched(broker.store, put)
    assert broker.offsets.earliest_store_time("T", 0) == T0
    broker.offsets.commit("G", "T", 0, 1)
    assert broker.offsets.table() == broker.offsets_table.table()
    assert broker.offsets.table().offset_table == {"T@G": {0: 1}}


# -- timer, compaction ---------------------------------------------------------------------

def test_the_timer_s_state_and_delay_offsets_or_not_running(broker: Broker, clock: ManualClock):
    assert broker.timer_state.state() is NOT_RUNNING
    assert broker.timer_state.delay_offsets() is NO_DELAY_OFFSETS
    broker.timer = TimerService(broker.store, broker.store_config, clock=clock)
    broker.timer.recover()
    due = T0 + 120_000
    assert broker.store.put_message(parked("U-1", due, schedule_queue=0)).ok  # delay level 1's queue
    broker.timer.replay_pending()
    state = broker.timer_state.state()
    assert not isinstance(state, Refusal)
    assert (state.slot_ms, state.precision_ms) == (TIMER["timerSlotMs"], TIMER["timerPrecisionMs"])
    assert [(s.slot_start_ms, s.scheduled) for s in state.slots] == [(due, 1)]
    assert state.stats.scheduled == 1
    assert broker.timer_state.delay_offsets() == {1: 0}  # level 2's queue holds nothing


def test_compaction_state_and_a_compaction_on_demand(broker: Broker):
    missing = Refusal(ResponseCode.TOPIC_NOT_EXIST, "topic Nowhere does not exist on this broker")
    assert asyncio.run(broker.compaction.status("Nowhere")) == missing
    assert asyncio.run(broker.compaction.compact("Nowhere")) == missing
    broker.topic("Plain", queues=1)
    refusal = asyncio.run(broker.compaction.compact("Plain"))
    assert isinstance(refusal, Refusal) and (refusal.code, refusal.bad_request) == (ResponseCode.SYSTEM_ERROR, True)
    assert "cleanup.policy is DELETE" in refusal.reason

    broker.topic("Table", queues=1, **{"cleanup.policy": "COMPACTION"})
    puts = [broker.store.put_message(message(i, topic="Table", keys=f"k{i % 2}")) for i in range(4)]
    wait_dispatched(broker.store, puts[-1])
    broker.store.flush()  # compaction reads only what is flushed
    before = asyncio.run(broker.compaction.status("Table"))
    assert not isinstance(before, Refusal)
    assert before.topic.topic_name == "Table" and before.runs == []
    assert [(s.queue_id, s.max_offset) for s in before.queues] == [(0, 4)]
    after = asyncio.run(broker.compaction.compact("Table"))
    assert not isinstance(after, Refusal)
    [run] = after.runs
    assert (run.queue_id, run.records_read, run.records_kept) == (0, 4, 2)
    assert after.queues[0].segment_records == 2


def wait_dispatched(store: MessageStore, put: PutResult) -> None:
    """The store indexes what it appended in its dispatch step; wait (with a deadline) until it has."""
    deadline = time.monotonic() + 10
    while store.dispatched_offset < put.physical_offset + put.wrote_bytes:
        assert time.monotonic() < deadline, "the store did not dispatch its appends"
        time.sleep(0.005)
