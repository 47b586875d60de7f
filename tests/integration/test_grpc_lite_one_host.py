"""Lite topics (RocketMQ 5.5, RIP-83) with a parent topic on two brokers of ONE host (as
`skiff up --brokers 2` runs them): each serves gRPC on its own port, which each advertises in the
NameServer's KV config (skiff.broker.grpc.routes), so routes name every broker's own endpoint and
a LITE message reaching the broker that does not keep its lite topic is forwarded to the one that
does; under ``tls.server.mode=enforcing`` that forward goes over TLS. A lite topic stays on the
broker that holds it when another broker joins the parent (skiff.broker.grpc.lite_peers: sticky
ownership), so its messages never sit in two brokers' queues.

The in-process clients are skiff.testing.grpc_wire's; the official Python client runs the same
layout in tests/interop/test_grpc_lite_client.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from skiff.common.java_hash import consistent_hash, java_string_hash
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, receive_lite
from skiff.testing.processes import SkiffProcess, free_port, start_broker
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from skiff.transport import RemotingClient
from skiff.transport.certificates import write_self_signed
from skiff.transport.tls import TlsClientConfig

QUEUES = 4
GROUP = "G-lite-one-host"
DEADLINE_S = 60.0

pytestmark = pytest.mark.xdist_group("grpc-lite")


def owner(lite: str, brokers: tuple[str, ...] = ("broker-a", "broker-b")) -> str:
    """The broker RocketMQ 5.5 places ``lite`` on: its write queue by consistent hash."""
    queues = sorted((name, i) for name in brokers for i in range(QUEUES))
    return queues[consistent_hash(java_string_hash(lite), len(queues))][0]


async def create_parent(wire: BrokerWire, parent: str) -> None:
    header = CreateTopicRequestHeader(parent, "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG",
                                      attributes="+message.type=LITE")
    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    config = SubscriptionGroupConfig(GROUP, attributes={"+lite.bind.topic": parent})
    resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def on_wire(addr: str, fn: Callable[[BrokerWire], Awaitable[Any]], tls: bool = False) -> Any:
    """``await fn(wire)`` with a remoting connection to ``addr`` (over TLS when ``tls``)."""
    async def main() -> Any:
        wire = BrokerWire(addr)
        if tls:
            await wire.client.close()
            wire.client = RemotingClient(tls=TlsClientConfig())
        try:
            return await fn(wire)
        finally:
            await wire.close()
    return asyncio.run(main())


def grpc_client(endpoint: str, client_id: str, trust: bytes | None = None) -> GrpcWire:
    """A gRPC client connection, over TLS trusting ``trust`` when given."""
    wire = GrpcWire(endpoint, client_id)
    if trust is not None:
        wire.channel = grpc.aio.secure_channel(endpoint, grpc.ssl_channel_credentials(root_certificates=trust))
    return wire


async def send(grpc_wire: GrpcWire, parent: str, n: int, lite: str, body: str) -> None:
    message = pb.Message(topic=pb.Resource(name=parent), body=body.encode(), system_properties=pb.SystemProperties(
        message_id=f"{n:032X}", message_type=pb.LITE, lite_topic=lite, body_encoding=pb.IDENTITY))
    sent = await grpc_wire.unary("SendMessage", rpc.SendMessageRequest(messages=[message]), rpc.SendMessageResponse)
    assert sent.status.code == pb.OK, sent.status.message


async def route_ports(grpc_wire: GrpcWire, parent: str) -> dict[str, set[int]]:
    route = await grpc_wire.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=parent)),
                                  rpc.QueryRouteResponse)
    ports: dict[str, set[int]] = {}
    for q in route.message_queues:
        ports.setdefault(q.broker.name, set()).update(a.port for a in q.broker.endpoints.addresses)
    return ports


async def stored(wire: BrokerWire, parent: str, lites: list[str]) -> dict[str, list[str]]:
    """lite topic -> the bodies its queue holds on the broker ``wire`` reaches."""
    out = {}
    for lite in lites:
        bodies = [m.body.decode() for m in await wire.pull_messages("G-look", f"%LMQ%|{parent}|{lite}", 0)]
        if bodies:
            out[lite] = bodies
    return out


@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, SkiffProcess, int, int]]:
    """Broker A (a Cluster with the NameServer) and broker B, both on 127.0.0.1, each its own gRPC port."""
    port_a, port_b, root = free_port(), free_port(), tmp_path_factory.mktemp("lite-one-host")
    with Cluster(root / "a", broker_args=[f"--grpcServerPort={port_a}"]) as c, \
            start_broker(root / "b", c.namesrv_addr, f"--grpcServerPort={port_b}", name="broker-b") as b:
        yield c, b, port_a, port_b


def test_routes_name_each_broker_of_one_host_at_its_own_grpc_port(one_host: tuple[Cluster, SkiffProcess, int, int]):
    c, b, port_a, port_b = one_host
    parent = "LiteOneHostRoute"
    for addr in (c.broker_addr(), b.addr):
        on_wire(addr, lambda w: create_parent(w, parent))

    async def test() -> None:
        for endpoint in (f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"):
            client = GrpcWire(endpoint, "one-host-route")
            try:
                async def both() -> dict[str, set[int]] | None:
                    ports = await route_ports(client, parent)
                    return ports if set(ports) == {"broker-a", "broker-b"} else None
                ports = await eventually(both, 30, "both brokers in the route")
                assert ports == {"broker-a": {port_a}, "broker-b": {port_b}}
            finally:
                await client.close()
    asyncio.run(test())


def test_lite_topics_of_one_host_stay_on_their_owner_whichever_broker_a_message_reaches(
        one_host: tuple[Cluster, SkiffProcess, int, int]):
    """Messages of 12 lite topics sent through A and B in turn: each lite topic's messages sit, in
    order, on its owner alone; a lite push consumer that synced with A alone receives all of them,
    each from the broker that holds it."""
    c, b, port_a, port_b = one_host
    parent, lites = "LiteOneHost", [f"host-{i}" for i in range(12)]
    placed = {lite: owner(lite) for lite in lites}
    assert set(placed.values()) == {"broker-a", "broker-b"}
    for addr in (c.broker_addr(), b.addr):
        on_wire(addr, lambda w: create_parent(w, parent))
    endpoints = {"broker-a": f"127.0.0.1:{port_a}", "broker-b": f"127.0.0.1:{port_b}"}

    async def test() -> list[tuple[str, str, str]]:
        producers = {name: GrpcWire(e, "one-host-producer") for name, e in endpoints.items()}
        consumers = {name: GrpcWire(e, "one-host-consumer") for name, e in endpoints.items()}
        try:
            async def both() -> bool:
                return set(await route_ports(producers["broker-a"], parent)) == {"broker-a", "broker-b"}
            await eventually(both, 30, "both brokers in the parent's route")
            settings = pb.Settings(client_type=pb.LITE_PUSH_CONSUMER, user_agent=pb.UA(language=pb.JAVA,
                                                                                        version="5.0.8"),
                                   subscription=pb.Subscription(group=pb.Resource(name=GROUP), subscriptions=[
                                       pb.SubscriptionEntry(topic=pb.Resource(name=parent), expression=pb.FilterExpression(
                                           type=pb.TAG, expression="*"))]))
            for consumer in consumers.values():
                assert (await consumer.settings(settings)).status.code == pb.OK
            synced = await consumers["broker-a"].unary("SyncLiteSubscription", rpc.SyncLiteSubscriptionRequest(
                action=pb.PARTIAL_ADD, topic=pb.Resource(name=parent), group=pb.Resource(name=GROUP),
                lite_topic_set=lites), rpc.SyncLiteSubscriptionResponse)
            assert synced.status.code == pb.OK, synced.status.message
            n = 0
            for k in range(3):
                for lite in lites:  # message k through A when k is even, through B when odd
                    await send(producers["broker-a" if k % 2 == 0 else "broker-b"], parent, n, lite, f"{lite}:{k}")
                    n += 1
            return await receive_lite(consumers, GROUP, parent, 3 * len(lites), DEADLINE_S)
        finally:
            for client in (*producers.values(), *consumers.values()):
                await client.close()
    got = asyncio.run(test())
    for lite in lites:
        assert [(broker, body) for broker, name, body in got if name == lite] == [
            (placed[lite], f"{lite}:{k}") for k in range(3)]  # from its owner, in order, each once
    on_a = on_wire(c.broker_addr(), lambda w: stored(w, parent, lites))
    on_b = on_wire(b.addr, lambda w: stored(w, parent, lites))
    assert on_a == {lite: [f"{lite}:{k}" for k in range(3)] for lite in lites if placed[lite] == "broker-a"}
    assert on_b == {lite: [f"{lite}:{k}" for k in range(3)] for lite in lites if placed[lite] == "broker-b"}


@pytest.mark.slow  # its own NameServer and brokers (9-12 s at load 5)
def test_a_lite_topic_stays_on_its_broker_when_another_broker_joins(tmp_path: Path):
    """A holds 12 lite topics (3 messages each) when broker B joins the parent on the same host; at
    once (no broker waits out its cached route) 3 more messages of each go through A and B in turn,
    and 8 new lite topics get 2 messages each the same way: every lite topic's messages sit on one
    broker, in order, the old ones on A. Without sticky ownership B, whose fresh route names both
    brokers, stores the old lite topics its hash picks while A still holds their first messages."""
    parent = "LiteJoin"
    old, new = [f"join-{i}" for i in range(12)], [f"fresh-{i}" for i in range(8)]
    assert {owner(lite) for lite in old} == {"broker-a", "broker-b"}  # B's hash takes some of A's
    port_a, port_b = free_port(), free_port()
    with Cluster(tmp_path / "a", broker_args=[f"--grpcServerPort={port_a}"]) as c:
        on_wire(c.broker_addr(), lambda w: create_parent(w, parent))

        async def before() -> None:
            client = GrpcWire(f"127.0.0.1:{port_a}", "join-producer")
            try:
                for k in range(3):
                    for i, lite in enumerate(old):
                        await send(client, parent, 100 * k + i, lite, f"{lite}:{k}")
            finally:
                await client.close()
        asyncio.run(before())
        with start_broker(tmp_path / "b", c.namesrv_addr, f"--grpcServerPort={port_b}", name="broker-b") as b:
            on_wire(b.addr, lambda w: create_parent(w, parent))

            async def after() -> None:
                clients = [GrpcWire(f"127.0.0.1:{port_a}", "join-producer"),
                           GrpcWire(f"127.0.0.1:{port_b}", "join-producer")]
                try:
                    async def b_knows_a() -> bool:
                        return set(await route_ports(clients[1], parent)) == {"broker-a", "broker-b"}
                    await eventually(b_knows_a, 30, "B's route naming both brokers")
                    for k in range(3, 6):
                        for i, lite in enumerate(old):
                            await send(clients[(k + i) % 2], parent, 1000 + 100 * k + i, lite, f"{lite}:{k}")
                    for k in range(2):
                        for i, lite in enumerate(new):
                            await send(clients[(k + i) % 2], parent, 5000 + 100 * k + i, lite, f"{lite}:{k}")
                finally:
                    for client in clients:
                        await client.close()
            asyncio.run(after())
            on_a = on_wire(c.broker_addr(), lambda w: stored(w, parent, old + new))
            on_b = on_wire(b.addr, lambda w: stored(w, parent, old + new))
    assert not set(on_a) & set(on_b), f"split over both brokers: {sorted(set(on_a) & set(on_b))}"
    for lite in old:
        assert on_a[lite] == [f"{lite}:{k}" for k in range(6)]
    for lite in new:
        assert (on_a.get(lite) or on_b.get(lite)) == [f"{lite}:{k}" for k in range(2)]


@pytest.mark.slow  # its own NameServer and brokers (9-12 s at load 5)
def test_lite_messages_are_forwarded_over_tls_when_the_grpc_door_enforces_it(tmp_path: Path):
    """Both brokers (one host) serve gRPC over TLS only (tls.server.mode=enforcing, one self-signed
    certificate): a LITE message sent to A for a lite topic B keeps reaches B over TLS (a plaintext
    forward would fail and leave it on A)."""
    pair = write_self_signed(tmp_path / "tls")
    trust = pair.cert_path.read_bytes()
    tls = ["--tls.server.mode=enforcing", f"--tls.server.certPath={pair.cert_path}",
           f"--tls.server.keyPath={pair.key_path}"]
    parent, lites = "LiteTls", [f"tls-{i}" for i in range(8)]
    placed = {lite: owner(lite) for lite in lites}
    assert set(placed.values()) == {"broker-a", "broker-b"}
    port_a, port_b = free_port(), free_port()
    with Cluster(tmp_path / "a", broker_args=[f"--grpcServerPort={port_a}", *tls]) as c, \
            start_broker(tmp_path / "b", c.namesrv_addr, f"--grpcServerPort={port_b}", *tls, name="broker-b") as b:
        for addr in (c.broker_addr(), b.addr):
            on_wire(addr, lambda w: create_parent(w, parent), tls=True)

        async def test() -> None:
            client = grpc_client(f"127.0.0.1:{port_a}", "tls-producer", trust)
            try:
                async def both() -> bool:
                    return set(await route_ports(client, parent)) == {"broker-a", "broker-b"}
                await eventually(both, 30, "both brokers in the parent's route")
                for i, lite in enumerate(lites):
                    await send(client, parent, 7000 + i, lite, f"{lite}:0")
            finally:
                await client.close()
        asyncio.run(test())
        on_a = on_wire(c.broker_addr(), lambda w: stored(w, parent, lites), tls=True)
        on_b = on_wire(b.addr, lambda w: stored(w, parent, lites), tls=True)
    assert on_a == {lite: [f"{lite}:0"] for lite in lites if placed[lite] == "broker-a"}
    assert on_b == {lite: [f"{lite}:0"] for lite in lites if placed[lite] == "broker-b"}
