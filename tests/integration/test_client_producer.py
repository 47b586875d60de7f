"""Our producer against real `skiff` processes (a NameServer and two brokers):
every feature, checked by reading every message back with the pull client."""

from __future__ import annotations

import threading
import zlib

import pytest

from skiff.client import (
    AsyncAdmin,
    AsyncProducer,
    AsyncPullClient,
    Message,
    MessageQueue,
    Producer,
    PullStatus,
    SelectByHash,
    SelectRoundRobin,
    SendStatus,
)
from skiff.client._impl.config import ClientConfig
from skiff.client.errors import MessageValidationError, NoRouteError
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.transport.loop import run_coroutine

QUEUES = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("producer"), brokers=2) as c:
        yield c


def config(cluster: Cluster, name: str = "it-producer") -> ClientConfig:
    return ClientConfig(cluster.namesrv_addr, instance_name=name, client_ip="127.0.0.1")


async def create_topic(cluster: Cluster, topic: str, queues: int = QUEUES) -> None:
    """Create ``topic`` on both brokers and wait until the NameServer routes to both."""
    async with AsyncAdmin(client_config=config(cluster, "it-admin")) as admin:
        await admin.create_topic(topic, queue_nums=queues)

        async def routed() -> bool:
            try:
                return len((await admin.topic_route(topic)).queue_datas) == 2
            except Exception:
                return False

        await eventually(routed, 15, f"the route of {topic}")


async def read_all(cluster: Cluster, topic: str) -> dict[MessageQueue, list[StoredMessage]]:
    """Every message of every queue of ``topic``, in queue order."""
    out: dict[MessageQueue, list[StoredMessage]] = {}
    async with AsyncPullClient(client_config=config(cluster, "it-reader")) as pull:
        for mq in await pull.fetch_subscribe_queues(topic):
            messages, offset = [], 0
            while True:
                result = await pull.pull(mq, offset, 32)
                messages += result.messages
                if result.status is not PullStatus.FOUND:
                    break
                offset = result.next_begin_offset
            out[mq] = messages
    return out


def by_id(stored: dict[MessageQueue, list[StoredMessage]]) -> dict[str, StoredMessage]:
    return {m.msg_id: m for msgs in stored.values() for m in msgs}


def test_sent_messages_come_back_with_everything_they_carried(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-fields")
        async with AsyncProducer("PG-fields", client_config=config(cluster)) as producer:
            sent = [(i, await producer.send(Message.of(
                "P-fields", f"body-{i}".encode(), tags=f"tag{i % 3}", keys=[f"k{i}", "common"],
                properties={"user": str(i), "ünï": "çødé"}, flag=i)))
                for i in range(20)]
        stored = by_id(await read_all(cluster, "P-fields"))
        assert len(stored) == 20
        for i, result in sent:
            m = stored[result.msg_id]
            assert result.send_status is SendStatus.SEND_OK
            assert (m.body, m.tags, m.keys, m.flag) == (f"body-{i}".encode(), f"tag{i % 3}", [f"k{i}", "common"], i)
            assert m.properties["user"] == str(i) and m.properties["ünï"] == "çødé"
            assert m.properties[Prop.UNIQ_KEY] == result.msg_id
            assert (m.topic, m.queue_id, m.queue_offset) == ("P-fields", result.message_queue.queue_id,
                                                             result.queue_offset)
            assert m.offset_msg_id == result.offset_msg_id
            assert decode_offset_msg_id(result.offset_msg_id).addr == m.store_host
        assert {r.message_queue.broker_name for _, r in sent} == {"broker-a", "broker-b"}

    run_coroutine(main())


def test_selectors_keep_each_key_in_one_queue_in_order(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-order")
        keys = [f"order-{n}" for n in range(6)]
        async with AsyncProducer("PG-order", client_config=config(cluster)) as producer:
            placed = {}
            for step in range(10):
                for key in keys:
                    r = await producer.send(Message.of("P-order", f"{key}:{step}", keys=key),
                                            selector=SelectByHash(), arg=key)
                    assert placed.setdefault(key, r.message_queue) == r.message_queue
            rr = SelectRoundRobin()
            rr_queues = [(await producer.send(Message.of("P-order", b"rr", tags="rr"), selector=rr)).message_queue
                         for _ in range(2 * QUEUES)]
            pinned = MessageQueue("P-order", "broker-b", 3)
            assert (await producer.send(Message.of("P-order", b"pinned"), queue=pinned)).message_queue == pinned
        assert len(set(rr_queues)) == 2 * QUEUES  # every queue of both brokers, once each
        stored = await read_all(cluster, "P-order")
        for key in keys:
            in_queue = [m.body.decode() for m in stored[placed[key]] if m.keys == [key]]
            assert in_queue == [f"{key}:{step}" for step in range(10)]
        assert [m.body for m in stored[pinned]][-1] == b"pinned"

    run_coroutine(main())


def test_batches_are_split_to_the_limit_and_every_message_lands(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-batch")
        msgs = [Message.of("P-batch", bytes([i % 256]) * 1000 + str(i).encode(), keys=f"b{i}") for i in range(300)]
        async with AsyncProducer("PG-batch", client_config=config(cluster), max_message_size=64 * 1024) as producer:
            results = await producer.send_batch(msgs)
        assert len(results) == 5  # 300 records of ~1.1 KiB in sends of at most 64 KiB
        ids = [i for r in results for i in r.msg_ids]
        assert len(ids) == len(set(ids)) == 300
        stored = by_id(await read_all(cluster, "P-batch"))
        assert sorted(stored) == sorted(ids)
        for msg, msg_id in zip(msgs, ids):
            assert (stored[msg_id].body, stored[msg_id].keys) == (msg.body, msg.keys)
        for r in results:  # each send's messages follow each other in one queue
            offsets = sorted(stored[i].queue_offset for i in r.msg_ids)
            assert offsets == list(range(r.queue_offset, r.queue_offset + len(r.msg_ids)))
            assert {stored[i].queue_id for i in r.msg_ids} == {r.message_queue.queue_id}

    run_coroutine(main())


def test_large_bodies_are_compressed_on_the_wire_and_read_back_whole(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-zip")
        body = (b"compressible " * 2000)[:20_000]
        async with AsyncProducer("PG-zip", client_config=config(cluster)) as producer:
            big = await producer.send(Message.of("P-zip", body))
            small = await producer.send(Message.of("P-zip", b"s" * 100))
        stored = by_id(await read_all(cluster, "P-zip"))
        assert stored[big.msg_id].body == body and stored[big.msg_id].sys_flag & 1
        assert stored[big.msg_id].store_size < len(zlib.compress(body)) + 400  # stored compressed
        assert stored[small.msg_id].body == b"s" * 100 and not stored[small.msg_id].sys_flag & 1

    run_coroutine(main())


def test_oneway_and_async_sends_land(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-modes")
        async with AsyncProducer("PG-modes", client_config=config(cluster)) as producer:
            for i in range(10):
                await producer.send_oneway(Message.of("P-modes", f"oneway-{i}", tags="oneway"))
            called = []
            tasks = [producer.send_async(Message.of("P-modes", f"async-{i}", tags="async"),
                                         lambda r, e: called.append((r, e))) for i in range(10)]
            results = [await t for t in tasks]

        async def all_there():
            bodies = {m.body for msgs in (await read_all(cluster, "P-modes")).values() for m in msgs}
            return len(bodies) == 20 and bodies

        bodies = await eventually(all_there, 10, "20 messages")
        assert bodies == {f"oneway-{i}".encode() for i in range(10)} | {f"async-{i}".encode() for i in range(10)}
        assert sorted(r.msg_id for r, _ in called) == sorted(r.msg_id for r in results)
        assert all(e is None for _, e in called)

    run_coroutine(main())


def test_delayed_messages_are_parked_for_the_timer(cluster: Cluster):
    async def main():
        await create_topic(cluster, "P-delay")
        async with AsyncProducer("PG-delay", client_config=config(cluster)) as producer:
            leveled = await producer.send(Message.of("P-delay", b"later", delay_level=3), queue=MessageQueue(
                "P-delay", "broker-a", 1))
        assert all(not msgs for msgs in (await read_all(cluster, "P-delay")).values())
        async with AsyncPullClient(client_config=config(cluster, "it-reader")) as pull:
            result = await pull.pull(MessageQueue(SCHEDULE_TOPIC, "broker-a", 2), 0, 32)
        parked = [m for m in result.messages if m.msg_id == leveled.msg_id]
        assert parked and parked[0].body == b"later"
        assert parked[0].properties[Prop.REAL_TOPIC] == "P-delay" and parked[0].properties[Prop.REAL_QID] == "1"
        assert parked[0].properties[Prop.DELAY] == "3"

    run_coroutine(main())


def test_a_topic_nobody_created_is_created_through_tbw102(cluster: Cluster):
    async def main():
        async with AsyncProducer("PG-auto", client_config=config(cluster)) as producer:
            first = await producer.send(Message.of("P-auto-created", b"first"))
            assert first.send_status is SendStatus.SEND_OK

        async def routed():
            try:
                return await read_all(cluster, "P-auto-created")
            except NoRouteError:
                return None

        stored = by_id(await eventually(routed, 15, "the new topic's route"))
        assert stored[first.msg_id].body == b"first"

    run_coroutine(main())


def test_bad_messages_never_reach_a_broker(cluster: Cluster):
    async def main():
        async with AsyncProducer("PG-bad", client_config=config(cluster)) as producer:
            for msg in (Message.of("P-bad", b""), Message.of("P bad", b"x"), Message.of("SCHEDULE_TOPIC_XXXX", b"x")):
                with pytest.raises(MessageValidationError):
                    await producer.send(msg)
        async with AsyncAdmin(client_config=config(cluster, "it-admin")) as admin:
            assert "P-bad" not in await admin.topic_list()

    run_coroutine(main())


def test_the_blocking_producer_serves_many_threads(cluster: Cluster):
    run_coroutine(create_topic(cluster, "P-threads"))
    with Producer("PG-threads", cluster.namesrv_addr, instance_name="it-blocking") as producer:
        results: list = []
        lock = threading.Lock()

        def work(t: int) -> None:
            for i in range(10):
                r = producer.send(Message.of("P-threads", f"{t}-{i}"))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        future = producer.send_async(Message.of("P-threads", b"via-future"))
        results.append(future.result(10))
        assert producer.client_id == f"{ClientConfig(cluster.namesrv_addr).client_ip}@it-blocking"
    stored = by_id(run_coroutine(read_all(cluster, "P-threads")))
    assert sorted(stored) == sorted(r.msg_id for r in results) and len(stored) == 41
