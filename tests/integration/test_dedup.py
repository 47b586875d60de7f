"""A topic's duplicate window over UNIQ_KEY (``dedup.window.ms``, skiff/broker/dedup.py) through
a real broker process and Skiff's own producer: a message sent again with its UNIQ_KEY is
stored once and both answers name the same queue and offset, for single sends (one by one
and many in flight, which the broker reads together), batches, and after a clean restart and
a SIGKILL; a topic without the attribute stores every send."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest

from skiff.client import Admin, AsyncProducer, Message, MessageQueue, Producer, PullClient, PullStatus, SendResult
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire
from skiff.testing.processes import free_port
from tests.integration.consumer_kit import config

DEDUP, PLAIN = "DedupOrders", "PlainOrders"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    with Cluster(tmp_path_factory.mktemp("dedup"), broker_args=[f"--grpcServerPort={port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        with Admin(c.namesrv_addr) as admin:
            admin.create_topic(DEDUP, queue_nums=4, attributes={DEDUP_WINDOW_MS: "600000"})
            admin.create_topic(PLAIN, queue_nums=4)
        yield c


def msg(topic: str, n: int) -> Message:
    return Message.of(topic, f"order-{n}", properties={"UNIQ_KEY": f"{n:032X}"})


def bodies(namesrv: str, topic: str) -> Counter[bytes]:
    """How many times each body is stored in ``topic`` (all queues, from offset 0)."""
    out: Counter[bytes] = Counter()
    with PullClient(namesrv) as client:
        for mq in client.fetch_subscribe_queues(topic):
            offset = 0
            while True:
                result = client.pull(mq, offset, 64)
                if result.status is not PullStatus.FOUND:
                    break
                out.update(m.body for m in result.messages)
                offset = result.next_begin_offset
    return out


def where(r: SendResult) -> tuple[MessageQueue, int, str]:
    return r.message_queue, r.queue_offset, r.offset_msg_id


def test_a_message_sent_twice_is_stored_once_with_one_answer(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    with Producer("dedup-producer", ns) as producer:
        first = producer.send(msg(DEDUP, 1))
        again = producer.send(msg(DEDUP, 1))  # the producer's next queue: answered with the first's
        assert where(again) == where(first) and again.msg_id == first.msg_id
        other = producer.send(msg(DEDUP, 2))
        [batch] = producer.send_batch([msg(DEDUP, 2), msg(DEDUP, 3), msg(DEDUP, 4), msg(DEDUP, 3)])
        assert batch.offset_msg_ids[0] == other.offset_msg_id and batch.offset_msg_ids[1] == batch.offset_msg_ids[3]
        assert len(set(batch.offset_msg_ids)) == 3
        [whole] = producer.send_batch([msg(DEDUP, 3), msg(DEDUP, 4)])  # stored already: the first's original
        assert whole.offset_msg_ids == batch.offset_msg_ids[1:3]
        plain = [producer.send(msg(PLAIN, 1)) for _ in range(2)]
        assert plain[0].offset_msg_id != plain[1].offset_msg_id
    assert bodies(ns, DEDUP) == Counter({f"order-{n}".encode(): 1 for n in (1, 2, 3, 4)})
    assert bodies(ns, PLAIN) == Counter({b"order-1": 2})


def test_sends_in_flight_together_are_stored_once_each(cluster: Cluster) -> None:
    """64 sends in flight, 8 ids each sent 8 times: the broker reads many of them together."""
    async def scenario() -> list[SendResult]:
        async with AsyncProducer("dedup-flight", client_config=config(cluster.namesrv_addr, "dedup-flight")) as p:
            return await asyncio.gather(*(p.send(msg(DEDUP, 100 + i % 8)) for i in range(64)))
    results = asyncio.run(scenario())
    by_id: dict[str, set[tuple[MessageQueue, int, str]]] = {}
    for r in results:
        by_id.setdefault(r.msg_id, set()).add(where(r))
    assert len(by_id) == 8 and all(len(answers) == 1 for answers in by_id.values())
    stored = bodies(cluster.namesrv_addr, DEDUP)
    assert [stored[f"order-{100 + i}".encode()] for i in range(8)] == [1] * 8


def test_grpc_sends_are_deduplicated_message_by_message(cluster: Cluster) -> None:
    """A 5.x SendMessage of several messages: each entry answered with its own original."""
    async def scenario() -> tuple[list[int], list[int]]:
        grpc = GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        try:
            ids = [f"{n:032X}" for n in (500, 501, 502)]
            first = await grpc.send(DEDUP, [b"order-500", b"order-501"], message_ids=ids[:2])
            again = await grpc.send(DEDUP, [b"order-502", b"order-500"], message_ids=[ids[2], ids[0]])
        finally:
            await grpc.close()
        assert all(e.status.code == pb.OK for e in [*first.entries, *again.entries])
        return [e.offset for e in first.entries], [e.offset for e in again.entries]
    first, again = asyncio.run(scenario())
    assert again[1] == first[0]
    stored = bodies(cluster.namesrv_addr, DEDUP)
    assert [stored[f"order-{n}".encode()] for n in (500, 501, 502)] == [1, 1, 1]


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_the_window_outlives_a_restart(cluster: Cluster, how: str) -> None:
    ns = cluster.namesrv_addr
    n = 200 if how == "restart" else 300
    with Producer(f"dedup-{how}", ns) as producer:
        before = producer.send(msg(DEDUP, n))
    if how == "restart":
        cluster.restart_broker(0)
    else:
        cluster.kill_broker(0)
        cluster.start_broker(0)
    with Producer(f"dedup-{how}-after", ns) as producer:
        after = producer.send(msg(DEDUP, n))
        assert where(after) == where(before)
        fresh = producer.send(msg(DEDUP, n + 1))
        assert where(fresh) != where(before)
    stored = bodies(ns, DEDUP)
    assert (stored[f"order-{n}".encode()], stored[f"order-{n + 1}".encode()]) == (1, 1)
