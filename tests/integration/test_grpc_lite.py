"""Lite topics (RocketMQ 5.5, RIP-83) over the gRPC endpoint, in process (skiff.testing.grpc_wire),
against a real broker: LITE sends under a parent topic of message.type LITE, SyncLiteSubscription,
the lite quota in Settings, lite consumers' receives (per lite topic in order, each message once),
a wildcard group (group attribute lite.sub.wildcard) receiving every lite topic of its parent, and
the official Python 5.1.2 client's subscribe sent split into characters.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import SERVICE, GrpcWire, first_status, messages
from skiff.testing.processes import free_port
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

PARENT, PLAIN = "LiteParent", "LitePlainTopic"
NESTED = PARENT + "|nested"
"""A parent whose lite topics' store names start as PARENT's do."""
WILDCARD, EXPLICIT, BOUND_ELSEWHERE = "G-lite-wild", "G-lite-explicit", "G-lite-bound"
EXCLUSIVE, OFFSETS, RESETS = "G-lite-exclusive", "G-lite-offsets", "G-lite-resets"
SUSPENDED, EVENTS = "G-lite-suspend", "G-lite-events"
DEADLINE_S = 60.0

pytestmark = pytest.mark.xdist_group("grpc-lite")  # one cluster for the module, not one per worker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    with Cluster(tmp_path_factory.mktemp("lite"), broker_args=[f"--grpcServerPort={port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]

        async def setup() -> None:
            wire = BrokerWire(c.broker_addr())
            try:
                for topic, attributes in ((PARENT, "+message.type=LITE"), (PLAIN, "+message.type=NORMAL"),
                                          (NESTED, "+message.type=LITE")):
                    header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG", attributes=attributes)
                    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                groups = {WILDCARD: {"+lite.sub.wildcard": "true", "+lite.bind.topic": PARENT},  # as mqadmin sends them
                          EXPLICIT: {"lite.bind.topic": PARENT, "lite.sub.client.quota": "3"},
                          BOUND_ELSEWHERE: {"lite.bind.topic": "SomeOtherParent"},
                          EXCLUSIVE: {"+lite.bind.topic": PARENT, "+lite.sub.model": "Exclusive"},
                          OFFSETS: {"+lite.bind.topic": PARENT},
                          RESETS: {"+lite.bind.topic": PARENT, "+lite.sub.model": "Exclusive",
                                   "+lite.sub.reset.offset.exclusive": "true",
                                   "+lite.sub.reset.offset.unsubscribe": "true"}}
                groups[EVENTS] = {"+lite.bind.topic": PARENT, "+lite.sub.client.max.event.cnt": "10"}
                for group, group_attributes in groups.items():
                    config = SubscriptionGroupConfig(group, attributes=group_attributes)
                    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                once = SubscriptionGroupConfig(SUSPENDED, retry_max_times=1, attributes={"+lite.bind.topic": PARENT})
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, once.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            finally:
                await wire.close()
        asyncio.run(setup())
        yield c


def lite_message(n: int, lite: str, body: bytes, topic: str = PARENT) -> pb.Message:
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
        message_id=f"{n:032X}", message_type=pb.LITE, lite_topic=lite, body_encoding=pb.IDENTITY))


async def send(grpc: GrpcWire, message: pb.Message) -> pb.Status:
    sent = await grpc.unary("SendMessage", rpc.SendMessageRequest(messages=[message]), rpc.SendMessageResponse)
    return sent.status


def lite_settings(group: str, *, language: Any = pb.JAVA, kind: Any = pb.LITE_SIMPLE_CONSUMER) -> pb.Settings:
    return pb.Settings(client_type=kind, user_agent=pb.UA(language=language, version="5.1.2"),
                       subscription=pb.Subscription(group=pb.Resource(name=group), subscriptions=[
                           pb.SubscriptionEntry(topic=pb.Resource(name=PARENT),
                                                expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))


async def lite_client(endpoint: str, client_id: str, group: str, *,
                      language: Any = pb.JAVA, kind: Any = pb.LITE_SIMPLE_CONSUMER) -> tuple[GrpcWire, Any]:
    """A lite consumer's connection and the server's reply to its Settings."""
    grpc = GrpcWire(endpoint, client_id)
    return grpc, await grpc.settings(lite_settings(group, language=language, kind=kind))


async def sync(grpc: GrpcWire, group: str, action: Any, names: Sequence[str], topic: str = PARENT) -> pb.Status:
    request = rpc.SyncLiteSubscriptionRequest(action=action, topic=pb.Resource(name=topic),
                                              group=pb.Resource(name=group), lite_topic_set=list(names))
    return (await grpc.unary("SyncLiteSubscription", request, rpc.SyncLiteSubscriptionResponse)).status


async def ack(grpc: GrpcWire, group: str, m: Any) -> int:
    entry = rpc.AckMessageEntry(message_id=m.system_properties.message_id,
                                receipt_handle=m.system_properties.receipt_handle,
                                lite_topic=m.system_properties.lite_topic)
    acked = await grpc.unary("AckMessage", rpc.AckMessageRequest(group=pb.Resource(name=group),
                                                                 topic=pb.Resource(name=PARENT), entries=[entry]),
                             rpc.AckMessageResponse)
    return int(acked.status.code)


async def receive_all(grpc: GrpcWire, group: str, want: int) -> list[Any]:
    """Receive and acknowledge until ``want`` messages came (or the deadline passed)."""
    got: list[Any] = []
    end = time.monotonic() + DEADLINE_S
    while len(got) < want and time.monotonic() < end:
        for m in messages(await grpc.receive(group, PARENT, wait_ms=2000)):
            got.append(m)
            assert await ack(grpc, group, m) == pb.OK
    return got


def test_a_wildcard_group_receives_each_message_of_100_lite_topics_once_in_order(cluster: Cluster):
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]

    async def test() -> None:
        producer = GrpcWire(endpoint, "lite-producer")
        consumer, reply = await lite_client(endpoint, "lite-wild-consumer", WILDCARD)
        try:
            assert reply.status.code == pb.OK
            assert (reply.settings.subscription.lite_subscription_quota,
                    reply.settings.subscription.max_lite_topic_size) == (2000, 64)
            route = await producer.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=PARENT)),
                                         rpc.QueryRouteResponse)
            assert list(route.message_queues[0].accept_message_types) == [pb.LITE]
            assert (await send(producer, lite_message(999, "lite-1", b"nested", topic=NESTED))).code == pb.OK
            sent = {}
            for i in range(100):  # topics 0-49 get messages before the subscription, 50-99 after
                for k in range(3):
                    n = i * 3 + k
                    assert (await send(producer, lite_message(n, f"lite-{i}", f"{i}:{k}".encode()))).code == pb.OK
                    sent[f"{n:032X}"] = f"{i}:{k}"
                if i == 49:
                    assert first_status(await consumer.receive(WILDCARD, PARENT)).code == pb.MESSAGE_NOT_FOUND
                    assert (await sync(consumer, WILDCARD, pb.PARTIAL_ADD, ["lite-1"])).code == pb.BAD_REQUEST
                    assert (await sync(consumer, WILDCARD, pb.COMPLETE_ADD, [])).code == pb.OK
            got = await receive_all(consumer, WILDCARD, len(sent))
            ids = [m.system_properties.message_id for m in got]
            assert sorted(ids) == sorted(sent) and len(set(ids)) == len(ids)  # every message, once
            for m in got:
                sp = m.system_properties
                assert (m.topic.name, sp.message_type, m.body.decode()) == (PARENT, pb.LITE, sent[sp.message_id])
                assert m.body.decode().split(":")[0] == sp.lite_topic.removeprefix("lite-")
            for i in range(100):
                mine = [m.body.decode() for m in got if m.system_properties.lite_topic == f"lite-{i}"]
                assert mine == [f"{i}:{k}" for k in range(3)]  # each lite topic in order
            assert first_status(await consumer.receive(WILDCARD, PARENT)).code == pb.MESSAGE_NOT_FOUND
            # a lite topic made after the wildcard subscription reaches it too, waking a waiting receive
            waiting = asyncio.ensure_future(consumer.receive(WILDCARD, PARENT, wait_ms=8000))
            await asyncio.sleep(0)
            assert (await send(producer, lite_message(1000, "late-comer", b"late"))).code == pb.OK
            late = messages(await waiting)
            assert [(m.body, m.system_properties.lite_topic) for m in late] == [(b"late", "late-comer")]
        finally:
            await producer.close()
            await consumer.close()
    asyncio.run(test())


def test_a_lite_topic_is_served_in_order_one_batch_at_a_time_and_only_when_subscribed(cluster: Cluster):
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]

    async def test() -> None:
        producer = GrpcWire(endpoint, "lite-producer-2")
        consumer, reply = await lite_client(endpoint, "lite-explicit-consumer", EXPLICIT)
        try:
            assert reply.settings.subscription.lite_subscription_quota == 3  # the group's lite.sub.client.quota
            for k in range(4):
                for j, lite in enumerate(("orders-a", "orders-b", "other")):
                    assert (await send(producer, lite_message(2000 + k * 10 + j, lite,
                                                              f"{lite}:{k}".encode()))).code == pb.OK
            assert first_status(await consumer.receive(EXPLICIT, PARENT)).code == pb.MESSAGE_NOT_FOUND
            assert (await sync(consumer, EXPLICIT, pb.PARTIAL_ADD, ["orders-a"])).code == pb.OK
            assert (await sync(consumer, EXPLICIT, pb.PARTIAL_ADD, ["orders-b"])).code == pb.OK
            first = messages(await consumer.receive(EXPLICIT, PARENT, batch=32))
            assert sorted(m.body.decode() for m in first) == sorted(f"{t}:{k}" for t in ("orders-a", "orders-b")
                                                                    for k in range(4))
            # un-acknowledged, both lite topics are blocked (FIFO per lite topic)
            assert first_status(await consumer.receive(EXPLICIT, PARENT)).code == pb.MESSAGE_NOT_FOUND
            for m in first:
                if m.system_properties.lite_topic == "orders-a":
                    assert await ack(consumer, EXPLICIT, m) == pb.OK
            assert (await send(producer, lite_message(2100, "orders-a", b"orders-a:4"))).code == pb.OK
            assert (await send(producer, lite_message(2101, "orders-b", b"orders-b:4"))).code == pb.OK
            after = messages(await consumer.receive(EXPLICIT, PARENT))
            assert [m.body for m in after] == [b"orders-a:4"]  # orders-b still waits for its batch's acks
            assert (await sync(consumer, EXPLICIT, pb.PARTIAL_REMOVE, ["orders-a"])).code == pb.OK
            assert (await sync(consumer, EXPLICIT, pb.COMPLETE_ADD, ["other"])).code == pb.OK
            others = messages(await consumer.receive(EXPLICIT, PARENT))
            assert [m.body.decode() for m in others] == [f"other:{k}" for k in range(4)]
        finally:
            await producer.close()
            await consumer.close()
    asyncio.run(test())


def test_the_python_clients_split_subscription_is_read_as_the_name_it_spells(cluster: Cluster):
    """rocketmq-python-client 5.1.2 sends subscribe_lite("py-topic") as a PARTIAL_ADD of its
    characters until its 30 s resync; its messages still flow at once, and no other lite topic
    (not "p", "y", "-", ...) is subscribed."""
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]

    async def test() -> None:
        producer = GrpcWire(endpoint, "lite-producer-3")
        group = "G-lite-python"
        consumer, _ = await lite_client(endpoint, "lite-python-consumer", group, language=pb.PYTHON,
                                        kind=pb.LITE_PUSH_CONSUMER)
        java, _ = await lite_client(endpoint, "lite-java-consumer", "G-lite-java")
        try:
            for lite in ("py-topic", "p", "y"):
                assert (await send(producer, lite_message(3000 + len(lite), lite, lite.encode()))).code == pb.OK
            assert (await sync(consumer, group, pb.PARTIAL_ADD, list("py-topic"))).code == pb.OK
            got = await receive_all(consumer, group, 1)
            assert [(m.body, m.system_properties.lite_topic) for m in got] == [(b"py-topic", "py-topic")]
            assert first_status(await consumer.receive(group, PARENT)).code == pb.MESSAGE_NOT_FOUND
            # the resync (COMPLETE_ADD of the true set) keeps it; a Java client's characters are names
            assert (await sync(consumer, group, pb.COMPLETE_ADD, ["py-topic"])).code == pb.OK
            assert (await sync(java, "G-lite-java", pb.PARTIAL_ADD, ["p", "y"])).code == pb.OK
            assert sorted(m.body for m in await receive_all(java, "G-lite-java", 2)) == [b"p", b"y"]
        finally:
            await producer.close()
            await consumer.close()
            await java.close()
    asyncio.run(test())


def test_a_lite_message_is_hidden_again_redelivered_and_dead_lettered_in_its_lite_topic(cluster: Cluster):
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]
    group = "G-lite-retry"

    async def settle(grpc: GrpcWire, method: str, request: Any, response: Any, m: Any) -> Any:
        request.group.name, request.topic.name = group, PARENT
        request.receipt_handle, request.message_id = m.system_properties.receipt_handle, m.system_properties.message_id
        request.lite_topic = m.system_properties.lite_topic
        return await grpc.unary(method, request, response)

    async def test() -> None:
        grpc, _ = await lite_client(endpoint, "lite-retry-consumer", group)
        try:
            assert (await send(grpc, lite_message(5000, "retried", b"r0"))).code == pb.OK
            assert (await send(grpc, lite_message(5001, "retried", b"r1"))).code == pb.OK
            assert (await sync(grpc, group, pb.PARTIAL_ADD, ["retried"])).code == pb.OK
            first = messages(await grpc.receive(group, PARENT))
            assert [(m.body, m.system_properties.delivery_attempt) for m in first] == [(b"r0", 1), (b"r1", 1)]
            assert await ack(grpc, group, first[1]) == pb.OK
            change = rpc.ChangeInvisibleDurationRequest()
            change.invisible_duration.FromMilliseconds(0)
            changed = await settle(grpc, "ChangeInvisibleDuration", change, rpc.ChangeInvisibleDurationResponse,
                                   first[0])
            assert changed.status.code == pb.OK
            again = messages(await grpc.receive(group, PARENT, wait_ms=3000))  # visible again at once
            assert [(m.body, m.system_properties.delivery_attempt) for m in again] == [(b"r0", 2)]
            forward = rpc.ForwardMessageToDeadLetterQueueRequest(delivery_attempt=2, max_delivery_attempts=2)
            moved = await settle(grpc, "ForwardMessageToDeadLetterQueue", forward,
                                 rpc.ForwardMessageToDeadLetterQueueResponse, again[0])
            assert moved.status.code == pb.OK
            assert first_status(await grpc.receive(group, PARENT)).code == pb.MESSAGE_NOT_FOUND

            async def dead_lettered() -> list[bytes] | None:
                return [m.body for m in messages(await grpc.pull(group, f"%DLQ%{group}", 0))] or None
            assert await eventually(dead_lettered, 15, "the DLQ copy") == [b"r0"]
        finally:
            await grpc.close()
    asyncio.run(test())


def test_lite_sends_and_subscriptions_are_refused_as_the_proxy_refuses_them(cluster: Cluster):
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]

    async def test() -> None:
        grpc, _ = await lite_client(endpoint, "lite-refused", EXPLICIT)
        try:
            normal = pb.Message(topic=pb.Resource(name=PARENT), body=b"x", system_properties=pb.SystemProperties(
                message_id="F" * 32, message_type=pb.NORMAL, body_encoding=pb.IDENTITY))
            codes = {
                "normal to parent": (await send(grpc, normal)).code,
                "lite to normal topic": (await send(grpc, lite_message(4000, "a", b"x", topic=PLAIN))).code,
                "bad name": (await send(grpc, lite_message(4001, "a$b", b"x"))).code,
                "long name": (await send(grpc, lite_message(4002, "x" * 65, b"x"))).code,
                "bound elsewhere": (await sync(grpc, BOUND_ELSEWHERE, pb.PARTIAL_ADD, ["a"])).code,
                "not a parent": (await sync(grpc, EXPLICIT, pb.PARTIAL_ADD, ["a"], topic=PLAIN)).code,
                "over quota": (await sync(grpc, EXPLICIT, pb.COMPLETE_ADD, [f"q{i}" for i in range(304)])).code,
                "bad subscribed name": (await sync(grpc, EXPLICIT, pb.PARTIAL_ADD, ["a|b"])).code,
            }
            assert codes == {
                "normal to parent": pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                "lite to normal topic": pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                "bad name": pb.ILLEGAL_LITE_TOPIC, "long name": pb.ILLEGAL_LITE_TOPIC,
                "bound elsewhere": pb.ILLEGAL_TOPIC, "not a parent": pb.ILLEGAL_TOPIC,
                "over quota": pb.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, "bad subscribed name": pb.ILLEGAL_LITE_TOPIC,
            }
        finally:
            await grpc.close()
    asyncio.run(test())


def test_an_exclusive_groups_lite_topic_is_served_only_to_the_client_that_added_it_last(cluster: Cluster):
    """lite.sub.model=Exclusive (5.5): a client adding a lite topic takes it from the group's other
    clients, which are told on their Telemetry stream (NotifyUnsubscribeLite) and not served it again,
    though their complete resync still names it (told again), until they add it themselves."""
    async def test() -> None:
        endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]
        x, y = GrpcWire(endpoint, "ex-x"), GrpcWire(endpoint, "ex-y")
        telemetry = x.channel.stream_stream(SERVICE + "Telemetry",
                                            request_serializer=rpc.TelemetryCommand.SerializeToString,
                                            response_deserializer=rpc.TelemetryCommand.FromString)
        stream = telemetry(metadata=x.metadata, timeout=DEADLINE_S)  # x's stream stays open for the notices
        try:
            await stream.write(rpc.TelemetryCommand(settings=lite_settings(EXCLUSIVE)))
            assert (await stream.read()).status.code == pb.OK
            assert (await y.settings(lite_settings(EXCLUSIVE))).status.code == pb.OK

            async def got(grpc: GrpcWire, wait_ms: int = 300) -> list[str]:
                bodies = []
                for m in messages(await grpc.receive(EXCLUSIVE, PARENT, wait_ms=wait_ms)):
                    bodies.append(m.body.decode())
                    assert await ack(grpc, EXCLUSIVE, m) == pb.OK
                return bodies

            async def notice() -> str:
                command = await asyncio.wait_for(stream.read(), 10)
                return str(command.notify_unsubscribe_lite_command.lite_topic)

            assert (await sync(x, EXCLUSIVE, pb.PARTIAL_ADD, ["ex-1"])).code == pb.OK
            assert (await send(x, lite_message(900, "ex-1", b"m0"))).code == pb.OK
            assert await got(x, 5000) == ["m0"]
            assert (await sync(y, EXCLUSIVE, pb.PARTIAL_ADD, ["ex-1"])).code == pb.OK
            assert await notice() == "ex-1"
            assert (await send(x, lite_message(901, "ex-1", b"m1"))).code == pb.OK
            assert (await got(x), await got(y, 5000)) == ([], ["m1"])
            assert (await sync(x, EXCLUSIVE, pb.COMPLETE_ADD, ["ex-1"])).code == pb.OK  # x's resync
            assert await notice() == "ex-1"
            assert (await send(x, lite_message(902, "ex-1", b"m2"))).code == pb.OK
            assert (await got(x), await got(y, 5000)) == ([], ["m2"])
            assert (await sync(x, EXCLUSIVE, pb.PARTIAL_ADD, ["ex-1"])).code == pb.OK  # x takes it back
            assert (await send(x, lite_message(903, "ex-1", b"m3"))).code == pb.OK
            assert (await got(y), await got(x, 5000)) == ([], ["m3"])
        finally:
            stream.cancel()
            await x.close()
            await y.close()
    asyncio.run(test())


def test_an_offset_option_moves_where_the_group_reads_a_lite_topic(cluster: Cluster):
    """A PARTIAL_ADD's offset_option (5.5; the Java client's subscribeLite(name, option)): MAX from the
    end, an offset, the last n before the committed offset, MIN from the first message."""
    async def test() -> None:
        grpc, reply = await lite_client(cluster.grpc_endpoint, "offsets-client", OFFSETS)  # type: ignore[attr-defined]
        try:
            assert reply.status.code == pb.OK
            for i in range(4):
                assert (await send(grpc, lite_message(950 + i, "off-1", f"o{i}".encode()))).code == pb.OK

            async def add(option: pb.OffsetOption) -> None:
                request = rpc.SyncLiteSubscriptionRequest(action=pb.PARTIAL_ADD, topic=pb.Resource(name=PARENT),
                                                          group=pb.Resource(name=OFFSETS), lite_topic_set=["off-1"],
                                                          offset_option=option)
                answer = await grpc.unary("SyncLiteSubscription", request, rpc.SyncLiteSubscriptionResponse)
                assert answer.status.code == pb.OK, answer.status.message

            async def bodies(wait_ms: int = 3000) -> list[str]:
                got = messages(await grpc.receive(OFFSETS, PARENT, wait_ms=wait_ms))
                for m in got:
                    assert await ack(grpc, OFFSETS, m) == pb.OK
                return [m.body.decode() for m in got]

            await add(pb.OffsetOption(policy=pb.OffsetOption.MAX))
            assert await bodies(500) == []  # from the end: the 4 sent before are passed over
            assert (await send(grpc, lite_message(954, "off-1", b"o4"))).code == pb.OK
            assert await bodies() == ["o4"]
            await add(pb.OffsetOption(offset=1))
            assert await bodies() == ["o1", "o2", "o3", "o4"]
            await add(pb.OffsetOption(tail_n=2))  # the committed offset is 5: from 3
            assert await bodies() == ["o3", "o4"]
            await add(pb.OffsetOption(policy=pb.OffsetOption.MIN))
            assert await bodies() == ["o0", "o1", "o2", "o3", "o4"]
            await add(pb.OffsetOption(timestamp=0))  # ignored, as 5.5 ignores it
            assert await bodies(500) == []
        finally:
            await grpc.close()
    asyncio.run(test())


def test_a_group_may_read_a_lite_topic_again_after_an_unsubscribe_or_an_eviction(cluster: Cluster):
    """lite.sub.reset.offset.unsubscribe and lite.sub.reset.offset.exclusive (5.5): a lite topic a client
    unsubscribes, or another client of the Exclusive group takes, is read again from its first message."""
    async def test() -> None:
        endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]
        (r1, _), (r2, _) = await lite_client(endpoint, "reset-1", RESETS), await lite_client(endpoint, "reset-2", RESETS)
        try:
            async def bodies(grpc: GrpcWire) -> list[str]:
                got = messages(await grpc.receive(RESETS, PARENT, wait_ms=3000))
                for m in got:
                    assert await ack(grpc, RESETS, m) == pb.OK
                return [m.body.decode() for m in got]
            for i in range(2):
                assert (await send(r1, lite_message(970 + i, "rs-1", f"r{i}".encode()))).code == pb.OK
            assert (await sync(r1, RESETS, pb.PARTIAL_ADD, ["rs-1"])).code == pb.OK
            assert await bodies(r1) == ["r0", "r1"]
            assert (await sync(r1, RESETS, pb.PARTIAL_REMOVE, ["rs-1"])).code == pb.OK
            assert (await sync(r1, RESETS, pb.PARTIAL_ADD, ["rs-1"])).code == pb.OK
            assert await bodies(r1) == ["r0", "r1"]  # read again after the unsubscribe
            assert (await sync(r2, RESETS, pb.PARTIAL_ADD, ["rs-1"])).code == pb.OK
            assert await bodies(r2) == ["r0", "r1"]  # and after r2 took it from r1
        finally:
            await r1.close()
            await r2.close()
    asyncio.run(test())


def test_a_suspended_lite_message_comes_back_with_the_same_delivery_attempt(cluster: Cluster):
    """ChangeInvisibleDuration with ``suspend`` (the Java lite push consumer's nack; RocketMQ 5.5's
    proxy passes it on: no retry counted): a message of a group allowing one retry is hidden and
    shown again three times with suspend and keeps delivery attempt 1; without suspend it comes back
    as attempt 2, and the next time goes to the DLQ."""
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]

    async def test() -> list[int]:
        grpc, _ = await lite_client(endpoint, "lite-suspend-consumer", SUSPENDED)
        try:
            assert (await send(grpc, lite_message(8000, "suspended", b"s0"))).code == pb.OK
            assert (await sync(grpc, SUSPENDED, pb.PARTIAL_ADD, ["suspended"])).code == pb.OK
            attempts = []
            for suspend in (True, True, True, False, False):
                got = messages(await grpc.receive(SUSPENDED, PARENT, wait_ms=3000))
                assert [m.body for m in got] == [b"s0"]
                attempts.append(got[0].system_properties.delivery_attempt)
                change = rpc.ChangeInvisibleDurationRequest(
                    group=pb.Resource(name=SUSPENDED), topic=pb.Resource(name=PARENT),
                    receipt_handle=got[0].system_properties.receipt_handle,
                    message_id=got[0].system_properties.message_id, lite_topic="suspended", suspend=suspend)
                change.invisible_duration.FromMilliseconds(0)
                changed = await grpc.unary("ChangeInvisibleDuration", change, rpc.ChangeInvisibleDurationResponse)
                assert changed.status.code == pb.OK, changed.status.message
            assert messages(await grpc.receive(SUSPENDED, PARENT, wait_ms=1500)) == []  # its third delivery: the DLQ

            async def dead_lettered() -> list[bytes] | None:
                return [m.body for m in messages(await grpc.pull(SUSPENDED, f"%DLQ%{SUSPENDED}", 0))] or None
            assert await eventually(dead_lettered, 15, "the DLQ copy") == [b"s0"]
            return attempts
        finally:
            await grpc.close()
    assert asyncio.run(test()) == [1, 1, 1, 1, 2]


def test_a_client_holds_batches_of_at_most_max_event_cnt_lite_topics(cluster: Cluster):
    """A group with lite.sub.client.max.event.cnt=10 (5.5's smallest): of 15 lite topics with a
    message each, one client's receive gets 10, and nothing more while it holds them; a second
    client of the group gets the other 5; once the first acknowledges its 10, it receives again."""
    endpoint = cluster.grpc_endpoint  # type: ignore[attr-defined]
    lites = [f"events-{i}" for i in range(15)]

    async def test() -> None:
        first, _ = await lite_client(endpoint, "lite-events-1", EVENTS)
        second, _ = await lite_client(endpoint, "lite-events-2", EVENTS)
        try:
            for i, lite in enumerate(lites):
                assert (await send(first, lite_message(8100 + i, lite, lite.encode()))).code == pb.OK
            for client in (first, second):
                assert (await sync(client, EVENTS, pb.PARTIAL_ADD, lites)).code == pb.OK
            held = messages(await first.receive(EVENTS, PARENT, wait_ms=3000))
            assert len(held) == 10 and len({m.system_properties.lite_topic for m in held}) == 10
            assert messages(await first.receive(EVENTS, PARENT, wait_ms=300)) == []
            rest = messages(await second.receive(EVENTS, PARENT, wait_ms=3000))
            assert sorted(m.system_properties.lite_topic for m in held + rest) == sorted(lites)
            for m in held:
                assert await ack(first, EVENTS, m) == pb.OK
            for i, m in enumerate(held):
                lite = m.system_properties.lite_topic
                assert (await send(first, lite_message(8200 + i, lite, b"again"))).code == pb.OK
            again = messages(await first.receive(EVENTS, PARENT, wait_ms=3000))
            assert [m.body for m in again] == [b"again"] * 10
        finally:
            await first.close()
            await second.close()
    asyncio.run(test())
