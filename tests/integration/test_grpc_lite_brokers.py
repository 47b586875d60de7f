"""Lite topics (RocketMQ 5.5, RIP-83) under a parent topic held by two brokers, in process
(skiff.testing.grpc_wire): each lite topic lives on the broker 5.5's consistent hash names, whichever
broker a message was sent to, and a subscription synced with one broker is served by both; a
LiteSimpleConsumer, which talks to the first broker of its route alone, gets every lite topic through it.

Broker A serves gRPC on 127.0.0.1 and broker B on 127.0.0.2, on one port (as a cluster's
brokers do, skiff.broker.grpc.routes).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skiff.common.java_hash import consistent_hash, java_string_hash
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, receive_lite
from skiff.testing.processes import free_port, start_broker
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

PARENT, GROUP = "LiteSpread", "G-lite-spread"
QUEUES = 4
LITES = [f"spread-{i}" for i in range(12)]
DEADLINE_S = 60.0

pytestmark = pytest.mark.xdist_group("grpc-lite")


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory):
    """(endpoint of A, endpoint of B) of two brokers holding PARENT, GROUP bound to it."""
    port, root = free_port(), tmp_path_factory.mktemp("lite-brokers")
    with Cluster(root / "a", broker_args=[f"--grpcServerPort={port}"]) as c, \
            start_broker(root / "b", c.namesrv_addr, f"--grpcServerPort={port}", name="broker-b",
                         host="127.0.0.2") as b:
        async def setup(addr: str) -> None:
            wire = BrokerWire(addr)
            try:
                header = CreateTopicRequestHeader(PARENT, "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG",
                                                  attributes="+message.type=LITE")
                assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == 0
                config = SubscriptionGroupConfig(GROUP, attributes={"+lite.bind.topic": PARENT})
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            finally:
                await wire.close()
        for addr in (c.broker_addr(), b.addr):
            asyncio.run(setup(addr))
        yield f"127.0.0.1:{port}", f"127.0.0.2:{port}"


def owner(lite: str) -> str:
    """The broker RocketMQ 5.5 places ``lite`` on: its write queue by consistent hash."""
    queues = sorted((name, i) for name in ("broker-a", "broker-b") for i in range(QUEUES))
    return queues[consistent_hash(java_string_hash(lite), len(queues))][0]


async def lite_consumer(endpoint: str, client_id: str = "spread-consumer", kind: Any = pb.LITE_SIMPLE_CONSUMER) -> \
        GrpcWire:
    grpc = GrpcWire(endpoint, client_id)
    settings = pb.Settings(client_type=kind, user_agent=pb.UA(language=pb.JAVA, version="5.0.8"),
                           subscription=pb.Subscription(group=pb.Resource(name=GROUP), subscriptions=[
                               pb.SubscriptionEntry(topic=pb.Resource(name=PARENT),
                                                    expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
    assert (await grpc.settings(settings)).status.code == pb.OK
    return grpc


async def send(grpc: GrpcWire, n: int, lite: str, body: str) -> None:
    message = pb.Message(topic=pb.Resource(name=PARENT), body=body.encode(), system_properties=pb.SystemProperties(
        message_id=f"{n:032X}", message_type=pb.LITE, lite_topic=lite, body_encoding=pb.IDENTITY))
    sent = await grpc.unary("SendMessage", rpc.SendMessageRequest(messages=[message]), rpc.SendMessageResponse)
    assert sent.status.code == pb.OK, sent.status.message


async def sync(grpc: GrpcWire, action: Any, names: list[str]) -> None:
    request = rpc.SyncLiteSubscriptionRequest(action=action, topic=pb.Resource(name=PARENT),
                                              group=pb.Resource(name=GROUP), lite_topic_set=names)
    answer = await grpc.unary("SyncLiteSubscription", request, rpc.SyncLiteSubscriptionResponse)
    assert answer.status.code == pb.OK, answer.status.message


async def drain(consumers: dict[str, GrpcWire], want: int, deadline_s: float = DEADLINE_S) -> \
        list[tuple[str, str, str]]:
    """(broker, lite topic, body) of what the brokers deliver, acknowledged, until ``want`` came."""
    return await receive_lite(consumers, GROUP, PARENT, want, deadline_s)


def test_lite_topics_live_on_their_owner_and_a_subscription_reaches_both_brokers(endpoints: tuple[str, str]):
    """Messages sent through either broker land on their lite topic's owner (5.5's placement), in
    order; the consumer syncs with A only, and B serves it B's lite topics too; a removal synced
    with A stops both brokers delivering that lite topic, and so does the client's termination told to A."""
    a, b = endpoints
    placed = {lite: owner(lite) for lite in LITES}
    assert set(placed.values()) == {"broker-a", "broker-b"}  # the names chosen spread over both

    async def test() -> None:
        producers = {"broker-a": GrpcWire(a, "spread-producer"), "broker-b": GrpcWire(b, "spread-producer")}
        consumers = {"broker-a": await lite_consumer(a, kind=pb.LITE_PUSH_CONSUMER),  # receives from each broker
                     "broker-b": await lite_consumer(b, kind=pb.LITE_PUSH_CONSUMER)}
        try:
            async def both_in_route() -> bool:
                route = await producers["broker-a"].unary(
                    "QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=PARENT)), rpc.QueryRouteResponse)
                return {q.broker.name for q in route.message_queues} == {"broker-a", "broker-b"}
            await eventually(both_in_route, 30, "both brokers in the parent's route")
            await sync(consumers["broker-a"], pb.PARTIAL_ADD, LITES)  # with A alone, as the clients do
            n = 0
            for k in range(3):
                for lite in LITES:  # message k through A when k is even, through B when odd
                    await send(producers["broker-a" if k % 2 == 0 else "broker-b"], n, lite, f"{lite}:{k}")
                    n += 1
            got = await drain(consumers, 3 * len(LITES))
            assert sorted(body for _, _, body in got) == sorted(f"{lite}:{k}" for lite in LITES for k in range(3))
            for lite in LITES:
                mine = [(broker, body) for broker, name, body in got if name == lite]
                assert mine == [(placed[lite], f"{lite}:{k}") for k in range(3)]  # its owner's, in order

            gone = LITES[0]
            await sync(consumers["broker-a"], pb.PARTIAL_REMOVE, [gone])
            await send(producers["broker-b"], n, gone, "after-remove")
            await send(producers["broker-b"], n + 1, LITES[1], "still-subscribed")
            later = await drain(consumers, 1)
            later += await drain(consumers, 1, deadline_s=2)  # a round more: nothing of the removed one
            assert [(lite, body) for _, lite, body in later] == [(LITES[1], "still-subscribed")]

            ended = await consumers["broker-a"].unary("NotifyClientTermination", rpc.NotifyClientTerminationRequest(
                group=pb.Resource(name=GROUP)), rpc.NotifyClientTerminationResponse)
            assert ended.status.code == pb.OK  # told to A alone: B drops the subscription too
            on_b = next(lite for lite in LITES[1:] if placed[lite] == "broker-b")
            await send(producers["broker-a"], n + 2, on_b, "after-termination")
            assert await drain({"broker-b": consumers["broker-b"]}, 1, deadline_s=2) == []
        finally:
            for grpc in (*producers.values(), *consumers.values()):
                await grpc.close()
    asyncio.run(test())


def test_a_lite_simple_consumer_of_one_broker_receives_and_settles_every_lite_topic(endpoints: tuple[str, str]):
    """A LiteSimpleConsumer receives from broker A alone (the clients keep the route's first broker):
    A receives for it what B owns, and its acks through A reach B, so B serves each lite topic's next
    batch (an orderly lite topic stays blocked until its batch is acknowledged)."""
    a, b = endpoints
    lites = [f"simple-{i}" for i in range(10)]
    placed = {lite: owner(lite) for lite in lites}
    assert set(placed.values()) == {"broker-a", "broker-b"}

    async def test() -> None:
        producer, consumer = GrpcWire(a, "simple-producer"), await lite_consumer(a, "simple-consumer")
        try:
            await sync(consumer, pb.PARTIAL_ADD, lites)
            for round_ in range(2):
                for i, lite in enumerate(lites):
                    await send(producer, 1000 + 100 * round_ + i, lite, f"{lite}:{round_}")
                got = await drain({"broker-a": consumer}, len(lites))
                assert sorted(body for _, _, body in got) == sorted(f"{lite}:{round_}" for lite in lites)
        finally:
            await producer.close()
            await consumer.close()
    asyncio.run(test())
