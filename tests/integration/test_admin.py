"""The admin API against real `skiff` processes: every answer checked against what
the test did to the cluster (messages sent, offsets committed, groups created)."""

from __future__ import annotations

import asyncio
import time

import pytest

from skiff.client import AsyncAdmin, AsyncProducer, AsyncPushConsumer, ConsumeStatus, Message, MessageQueue
from skiff.client._impl.config import ClientConfig
from skiff.client.errors import ClientError, MessageValidationError, NoRouteError
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.errors import ConsumerNotOnlineError
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.transport.loop import run_coroutine

NAME = "it-admin"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("admin"), brokers=2) as c:
        yield c


def config(cluster: Cluster, name: str = NAME) -> ClientConfig:
    return ClientConfig(cluster.namesrv_addr, instance_name=name, client_ip="127.0.0.1")


def with_admin(cluster: Cluster, test) -> None:
    async def main():
        async with AsyncAdmin(client_config=config(cluster)) as admin:
            await test(admin)

    run_coroutine(main())


async def routed(admin: AsyncAdmin, topic: str, brokers: int = 2):
    async def check():
        try:
            route = await admin.topic_route(topic)
        except NoRouteError:
            return None
        return route if len(route.queue_datas) == brokers else None

    return await eventually(check, 15, f"the route of {topic}")


async def send(cluster: Cluster, topic: str, msgs: list[Message], **kwargs) -> list:
    async with AsyncProducer("PG-admin", client_config=config(cluster, "it-admin-producer")) as producer:
        return [await producer.send(m, **kwargs) for m in msgs]


def test_cluster_lists_both_brokers_with_their_runtime(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        brokers = await admin.brokers()
        assert [(b.cluster, b.broker_name, b.broker_id, b.addr) for b in brokers] == [
            ("DefaultCluster", "broker-a", 0, cluster.broker_addr(0)),
            ("DefaultCluster", "broker-b", 0, cluster.broker_addr(1))]
        assert all(b.version == "V4_9_7" and b.error is None for b in brokers)
        assert brokers[0].runtime["brokerName"] == "broker-a"
        assert await admin.brokers("DefaultCluster", runtime=False) == [
            b.__class__(b.cluster, b.broker_name, b.broker_id, b.addr) for b in brokers]
        with pytest.raises(ClientError, match="no cluster named 'Nope'.*DefaultCluster"):
            await admin.brokers("Nope")

    with_admin(cluster, test)


def test_topic_create_update_status_and_delete(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        addrs = await admin.create_topic("A-topic", queue_nums=3)
        assert sorted(addrs) == sorted([cluster.broker_addr(0), cluster.broker_addr(1)])
        queue_dirs = cluster.store_dir(0) / "consumequeue" / "A-topic"
        assert sorted(p.name for p in queue_dirs.iterdir()) == ["0", "1", "2"]  # made with the topic
        files = [p for p in queue_dirs.rglob("*") if p.is_file()]  # each queue's first file, made empty
        assert sorted(str(p.relative_to(queue_dirs)) for p in files) == [f"{q}/{0:020d}" for q in range(3)]
        for p in files:  # sized, its first page reserved (and warmed with zeros), the rest of it no disk
            assert p.stat().st_blocks * 512 < p.stat().st_size
            assert not p.read_bytes().strip(b"\0")
        route = await admin.topic_route("A-topic")  # brokers register a topic before they answer its creation
        assert {(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas} == {
            ("broker-a", 3, 3, 6), ("broker-b", 3, 3, 6)}
        assert "A-topic" in await admin.topic_list()
        pinned = MessageQueue("A-topic", "broker-b", 2)
        await send(cluster, "A-topic", [Message.of("A-topic", f"m{i}") for i in range(5)], queue=pinned)
        status = {q.mq: q for q in await admin.topic_status("A-topic")}
        assert len(status) == 6
        assert (status[pinned].min_offset, status[pinned].max_offset) == (0, 5)
        assert abs(status[pinned].last_update_timestamp - time.time() * 1000) < 60_000
        assert all(q.max_offset == 0 and q.last_update_timestamp == 0 for mq, q in status.items() if mq != pinned)

        await admin.create_topic("A-topic", read_queue_nums=5, write_queue_nums=4, perm=Perm.READ,
                                 broker_addr=cluster.broker_addr(0))

        async def updated():
            r = await admin.topic_route("A-topic")
            a = next(q for q in r.queue_datas if q.broker_name == "broker-a")
            return (a.read_queue_nums, a.write_queue_nums, a.perm) == (5, 4, 4)

        assert await updated(), "the NameServer has the update when create_topic returns"
        await admin.delete_topic("A-topic")
        assert "A-topic" not in await admin.topic_list()
        assert not queue_dirs.exists()
        with pytest.raises(NoRouteError):
            await admin.topic_route("A-topic")
        with pytest.raises(MessageValidationError):
            await admin.create_topic("bad topic")

    with_admin(cluster, test)


def test_order_topic_config_reaches_the_nameserver(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        await admin.create_topic("A-ordered", queue_nums=2, order=True)
        route = await routed(admin, "A-ordered")
        assert route.order_topic_conf == "broker-a:2;broker-b:2"
        await admin.delete_topic("A-ordered")

    with_admin(cluster, test)


def test_offsets_progress_and_reset_by_time(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        await admin.create_topic("A-offsets", queue_nums=1)
        await routed(admin, "A-offsets")
        mq = MessageQueue("A-offsets", "broker-a", 0)
        early = await send(cluster, "A-offsets", [Message.of("A-offsets", f"e{i}") for i in range(3)], queue=mq)
        stored_early = await admin.message_by_id(early[-1].offset_msg_id)
        await eventually(lambda: time.time() * 1000 > stored_early.store_timestamp + 5, 5, "a later millisecond")
        cut_ms = int(time.time() * 1000)
        await eventually(lambda: time.time() * 1000 > cut_ms + 5, 5, "a later millisecond")
        await send(cluster, "A-offsets", [Message.of("A-offsets", f"l{i}") for i in range(4)], queue=mq)

        assert (await admin.min_offset(mq), await admin.max_offset(mq)) == (0, 7)
        assert await admin.search_offset(mq, cut_ms) == 3
        assert await admin.earliest_msg_store_time(mq) == (await admin.message_at(mq, 0)).store_timestamp
        await admin.update_consumer_offset("CG-offsets", mq, 6)
        assert await admin.fetch_consumer_offset("CG-offsets", mq) == 6

        progress = await admin.consumer_progress("CG-offsets", "A-offsets")
        row = next(q for q in progress.queues if q.mq == mq)
        assert (row.broker_offset, row.consumer_offset, row.lag) == (7, 6, 1)
        assert row.last_timestamp == (await admin.message_at(mq, 5)).store_timestamp
        assert progress.total_lag == sum(q.lag for q in progress.queues) >= 1

        reset = await admin.reset_offset_by_time("CG-offsets", "A-offsets", cut_ms)
        assert reset[mq] == 3
        assert await admin.fetch_consumer_offset("CG-offsets", mq) == 3
        back = await admin.reset_offset_by_time("CG-offsets", "A-offsets", 0)
        assert back[mq] == 0 and await admin.fetch_consumer_offset("CG-offsets", mq) == 0

    with_admin(cluster, test)


def test_groups_and_connections(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        await admin.create_consumer_group("CG-created", retry_max_times=3)
        for addr in (cluster.broker_addr(0), cluster.broker_addr(1)):
            groups = (await admin._inst.api.get_all_subscription_groups(addr)).subscription_group_table
            assert groups["CG-created"].retry_max_times == 3
        await admin.delete_consumer_group("CG-created")
        groups = (await admin._inst.api.get_all_subscription_groups(cluster.broker_addr(0))).subscription_group_table
        assert "CG-created" not in groups
        with pytest.raises(ConsumerNotOnlineError):
            await admin.consumer_connections("CG-nobody")

        await admin.create_topic("A-live", queue_nums=2)
        await routed(admin, "A-live")
        consumer = AsyncPushConsumer("CG-live", client_config=config(cluster, "it-admin-consumer"))
        consumer.subscribe("A-live", "TagA || TagB")
        consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
        async with consumer:
            conns = await eventually(_connections(admin, "CG-live"), 15, "the consumer's connection")
            assert [c.client_id for c in conns.connections] == ["127.0.0.1@it-admin-consumer"]
            assert conns.connections[0].language == "PYTHON"
            assert conns.subscriptions["A-live"].sub_string == "TagA || TagB"

    with_admin(cluster, test)


def _connections(admin: AsyncAdmin, group: str):
    async def check():
        try:
            return await admin.consumer_connections(group)
        except ConsumerNotOnlineError:
            return None

    return check


def test_messages_by_id_key_and_offset(cluster: Cluster):
    async def test(admin: AsyncAdmin):
        await admin.create_topic("A-query", queue_nums=2)
        await routed(admin, "A-query")
        results = await send(cluster, "A-query", [Message.of("A-query", f"q{i}", keys=[f"key-{i % 2}", f"id-{i}"])
                                                  for i in range(6)])
        for i, r in enumerate(results):
            assert (await admin.message_by_id(r.offset_msg_id)).body == f"q{i}".encode()
            assert (await admin.message_by_id(r.msg_id, "A-query")).body == f"q{i}".encode()
        with pytest.raises(MessageValidationError, match="give the topic"):
            await admin.message_by_id(results[0].msg_id)

        async def indexed():
            found = await admin.messages_by_key("A-query", "key-1")
            return len(found) == 3 and found

        found = await eventually(indexed, 15, "the key index")
        assert sorted(m.body for m in found) == [b"q1", b"q3", b"q5"]  # two brokers: same-ms stores have no order
        assert [m.store_timestamp for m in found] == sorted(m.store_timestamp for m in found)
        assert await admin.messages_by_key("A-query", "key-9") == []
        r = results[4]
        at = await admin.message_at(r.message_queue, r.queue_offset)
        assert at is not None and at.msg_id == r.msg_id
        assert await admin.message_at(r.message_queue, 10_000) is None

    with_admin(cluster, test)


def test_the_blocking_admin(cluster: Cluster):
    from skiff.client import Admin

    with Admin(cluster.namesrv_addr, instance_name="it-blocking-admin") as admin:
        assert {b.broker_name for b in admin.brokers(runtime=False)} == {"broker-a", "broker-b"}
        assert "TBW102" in admin.topic_list()
    assert not asyncio.iscoroutinefunction(Admin.topic_list)
