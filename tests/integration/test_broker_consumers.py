"""Consumer groups on a real broker: heartbeats, membership and notifications,
offsets (where a new group starts, persistence across a restart), orderly locks,
client expiry, and the admin requests a CLI and a dashboard send."""

from __future__ import annotations

import time

import pytest

from skiff.common.message import Message, MessageQueue
from skiff.common.names import retry_topic
from skiff.protocol.bodies.admin import KVTable, SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicStatsTable
from skiff.protocol.bodies.client_calls import ResetOffsetBody
from skiff.protocol.bodies.consumer import ConsumerConnection, ConsumerIdList, ConsumeStats, ProducerConnection
from skiff.protocol.bodies.lock import LockBatchRequestBody
from skiff.protocol.bodies.topic import TopicConfigSerializeWrapper
from skiff.protocol.codes import LanguageCode, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, consumer
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine

LOCK_LIVE_MS = 1500
EXPIRY_MS = 1500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    args = [f"--rebalanceLockMaxLiveTime={LOCK_LIVE_MS}", f"--clientChannelExpiredTime={EXPIRY_MS}",
            "--clientScanInterval=200"]
    with Cluster(tmp_path_factory.mktemp("consumers"), broker_args=args) as c:
        yield c


class Member:
    """A client connection that records the requests the broker sends it."""

    def __init__(self, addr: str, client_id: str) -> None:
        self.client_id = client_id
        self.calls: list[RemotingCommand] = []
        handlers = {code: self._record for code in (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                   RequestCode.RESET_CONSUMER_CLIENT_OFFSET)}
        self.wire = BrokerWire(addr, handlers=handlers)

    def _record(self, conn: Connection, cmd: RemotingCommand) -> None:
        self.calls.append(cmd)

    def codes(self) -> list[int]:
        return [c.code for c in self.calls]


def consumer_ids(resp: RemotingCommand) -> list[str]:
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return sorted(ConsumerIdList.from_json(resp.body).consumer_id_list)


def test_members_are_listed_and_told_when_the_group_changes(cluster: Cluster):
    async def main():
        a, b = Member(cluster.broker_addr(), "client-a"), Member(cluster.broker_addr(), "client-b")
        try:
            group = {"consumerGroup": "G-members"}
            none = await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, group)
            assert none.code == ResponseCode.SYSTEM_ERROR and "no consumer of group G-members" in none.remark
            await a.wire.heartbeat("client-a", consumers=[consumer("G-members", "Shared")], producers=["PG-a"])
            assert consumer_ids(await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, group)) == ["client-a"]
            await b.wire.heartbeat("client-b", consumers=[consumer("G-members", "Shared")])
            await eventually(lambda: RequestCode.NOTIFY_CONSUMER_IDS_CHANGED in a.codes(), 5, "a's notification")
            assert b.codes() == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]  # b is a member when it is told
            assert a.calls[0].ext("consumerGroup") == "G-members"
            assert consumer_ids(await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, group)) == [
                "client-a", "client-b"]

            tables = TopicConfigSerializeWrapper.from_json((await a.wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)).body)
            retry = tables.topic_config_table[retry_topic("G-members")]
            assert (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)

            connections = ConsumerConnection.from_json(
                (await a.wire.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, group)).body)
            assert sorted(c.client_id for c in connections.connection_set) == ["client-a", "client-b"]
            assert {c.language for c in connections.connection_set} == {LanguageCode.PYTHON}
            assert set(connections.subscription_table) == {"Shared"}
            producers = await a.wire.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG-a"})
            assert [c.client_id for c in ProducerConnection.from_json(producers.body).connection_set] == ["client-a"]

            before = len(a.calls)
            await b.wire.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "client-b", "producerGroup": "",
                                                              "consumerGroup": "G-members"})
            await eventually(lambda: len(a.calls) > before, 5, "a's notification of b leaving")
            assert consumer_ids(await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, group)) == ["client-a"]
            before = len(a.calls)
            await b.wire.heartbeat("client-b", consumers=[consumer("G-members", "Shared")])
            await b.wire.close()
            await eventually(lambda: len(a.calls) >= before + 2, 5, "notifications of b's return and its closing")
            assert consumer_ids(await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, group)) == ["client-a"]
        finally:
            await a.wire.close()
            await b.wire.close()
    run_coroutine(main())


def test_a_group_can_ask_not_to_be_told(cluster: Cluster):
    async def main():
        a, b = Member(cluster.broker_addr(), "client-qa"), Member(cluster.broker_addr(), "client-qb")
        try:
            quiet = SubscriptionGroupConfig("G-quiet-group", notify_consumer_ids_changed_enable=False)
            await a.wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, quiet.to_json())
            await a.wire.heartbeat("client-qa", consumers=[consumer("G-quiet-group", "Hush")])
            await b.wire.heartbeat("client-qb", consumers=[consumer("G-quiet-group", "Hush")])
            members = await a.wire.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G-quiet-group"})
            assert consumer_ids(members) == ["client-qa", "client-qb"]
            # A round trip on each connection after the joins: a notification would have arrived first.
            await a.wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            await b.wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert a.calls == [] and b.calls == []
        finally:
            await a.wire.close()
            await b.wire.close()
    run_coroutine(main())


def test_silent_clients_expire(cluster: Cluster):
    async def main():
        m = Member(cluster.broker_addr(), "client-quiet")
        try:
            await m.wire.heartbeat("client-quiet", consumers=[consumer("G-quiet", "Quiet")])
            conn = m.wire.client.connections[cluster.broker_addr()]
            started = time.monotonic()
            await eventually(lambda: conn.is_closed, 10, "the broker closing a silent client")
            assert time.monotonic() - started >= EXPIRY_MS / 1000 - 0.3
        finally:
            await m.wire.close()
        assert "client-quiet at" in cluster.broker().output and "expired" in cluster.broker().output
    run_coroutine(main())


def test_offsets_where_new_groups_start_and_a_restart(cluster: Cluster):
    async def main():
        wire = BrokerWire(cluster.broker_addr())
        try:
            for i in range(3):
                await wire.send(Message.of("Offsets", f"m{i}"), queue_id=0)
            query = {"consumerGroup": "G-new", "topic": "Offsets", "queueId": 0}
            young = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, query)
            assert (young.code, young.ext("offset")) == (ResponseCode.SUCCESS, "0")  # a young queue: from its start
            for code, ext, expected in (
                (RequestCode.GET_MAX_OFFSET, {"topic": "Offsets", "queueId": 0}, "3"),
                (RequestCode.GET_MIN_OFFSET, {"topic": "Offsets", "queueId": 0}, "0"),
                (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "Offsets", "queueId": 0, "timestamp": 1 << 50}, "3"),
                (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "Offsets", "queueId": 0, "timestamp": 0}, "0"),
            ):
                resp = await wire.call(code, ext)
                assert (resp.code, resp.ext("offset")) == (ResponseCode.SUCCESS, expected), code
            earliest = await wire.call(RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "Offsets", "queueId": 0})
            assert abs(int(earliest.ext("timestamp")) - time.time() * 1000) < 60_000
            update = {"consumerGroup": "G-old", "topic": "Offsets", "queueId": 0, "commitOffset": 2}
            assert (await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET, update)).code == ResponseCode.SUCCESS
        finally:
            await wire.close()
    run_coroutine(main())
    cluster.restart_broker(0)

    async def after():
        wire = BrokerWire(cluster.broker_addr())
        try:
            resp = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G-old", "topic": "Offsets",
                                                                       "queueId": 0})
            assert (resp.code, resp.ext("offset")) == (ResponseCode.SUCCESS, "2")
            assert [m.body for m in await wire.pull_messages("G-old", "Offsets", 0, 2)] == [b"m2"]
        finally:
            await wire.close()
    run_coroutine(after())


def test_orderly_locks_and_their_expiry(cluster: Cluster):
    async def main():
        wire = BrokerWire(cluster.broker_addr())
        try:
            queues = [MessageQueue("Ordered", "broker-a", i) for i in range(3)]
            assert await wire.lock("G-lock", "c1", queues[:2]) == queues[:2]
            assert await wire.lock("G-lock", "c2", queues) == [queues[2]]
            unlock = await wire.call(RequestCode.UNLOCK_BATCH_MQ, None,
                                     _lock_body("G-lock", "c1", queues[:1]))
            assert unlock.code == ResponseCode.SUCCESS
            assert await wire.lock("G-lock", "c2", queues) == [queues[0], queues[2]]
            started = time.monotonic()
            await eventually(lambda: wire.lock("G-lock", "c2", queues[1:2]), 10, "c1's lock expiring")
            assert time.monotonic() - started >= LOCK_LIVE_MS / 1000 - 0.6
        finally:
            await wire.close()
    run_coroutine(main())


def _lock_body(group: str, client: str, queues: list[MessageQueue]) -> bytes:
    return LockBatchRequestBody(group, client, tuple(queues)).to_json()


def test_admin_requests(cluster: Cluster):
    async def main():
        member = Member(cluster.broker_addr(), "client-admin")
        wire = member.wire
        try:
            for i in range(4):
                await wire.send(Message.of("Admin", f"a{i}"), queue_id=i % 2)
            stats = TopicStatsTable.from_json((await wire.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})).body)
            q0 = stats.offset_table[MessageQueue("Admin", "broker-a", 0)]
            assert (q0.min_offset, q0.max_offset) == (0, 2) and q0.last_update_timestamp > 0

            await wire.heartbeat("client-admin", consumers=[consumer("G-admin", "Admin")])
            await wire.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                            {"consumerGroup": "G-admin", "topic": "Admin", "queueId": 0, "commitOffset": 1})
            consume = ConsumeStats.from_json((await wire.call(RequestCode.GET_CONSUME_STATS,
                                                             {"consumerGroup": "G-admin"})).body)
            assert consume.offset_table[MessageQueue("Admin", "broker-a", 0)].consumer_offset == 1
            assert consume.total_diff() == 3

            reset = await wire.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                    {"topic": "Admin", "group": "G-admin", "timestamp": 0, "isForce": "true"})
            assert set(ResetOffsetBody.from_json(reset.body).offset_table.values()) == {0}
            await eventually(lambda: RequestCode.RESET_CONSUMER_CLIENT_OFFSET in member.codes(), 5, "the reset call")
            told = next(c for c in member.calls if c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
            assert set(ResetOffsetBody.from_json(told.body).offset_table.values()) == {0}
            offset = await wire.call(RequestCode.QUERY_CONSUMER_OFFSET,
                                     {"consumerGroup": "G-admin", "topic": "Admin", "queueId": 0})
            assert offset.ext("offset") == "0"

            group = SubscriptionGroupConfig("G-made", retry_max_times=3, consume_broadcast_enable=False)
            assert (await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, group.to_json())).code == 0
            groups = SubscriptionGroupWrapper.from_json((await wire.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
            assert groups.subscription_group_table["G-made"] == group
            await wire.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G-made", "removeOffset": "true"})
            groups = SubscriptionGroupWrapper.from_json((await wire.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
            assert "G-made" not in groups.subscription_group_table

            info = KVTable.from_json((await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
            assert int(info["msgPutTotalTodayNow"]) >= 4 and info["brokerVersionDesc"] == "V4_9_7"
            config = (await wire.call(RequestCode.GET_BROKER_CONFIG)).body.decode()
            assert "brokerName=broker-a\n" in config and f"rebalanceLockMaxLiveTime={LOCK_LIVE_MS}\n" in config

            assert (await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})).code == 0
            gone = await wire.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})
            assert gone.code == ResponseCode.TOPIC_NOT_EXIST
            system = await wire.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
            assert system.code == ResponseCode.SYSTEM_ERROR and "system topic" in system.remark
        finally:
            await wire.close()
    run_coroutine(main())
