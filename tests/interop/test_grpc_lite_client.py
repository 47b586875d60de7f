"""Lite topics (RocketMQ 5.5, RIP-83) with the official RocketMQ 5.x Python client (PyPI
rocketmq-python-client 5.1.2, unchanged, in its own venv) against a real `skiff broker`'s gRPC
endpoint: a LitePushConsumer of a wildcard group receives every message of 100 lite topics once,
in order per lite topic; a LiteSimpleConsumer's subscribe_lite, which that client sends split into
characters until its 30 s resync, gets its messages at once and only those; with the parent on two
brokers of one host (as `skiff up --brokers 2` runs them: each its own gRPC port), a LitePushConsumer
that subscribes through one receives every message of its lite topics, each lite topic stored on
the broker RocketMQ 5.5 places it on.

The scenarios run in tests/interop/grpc/lite_client.py under SKIFF_RMQ5_PYTHON.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.common.java_hash import consistent_hash, java_string_hash
from skiff.testing.processes import free_port, start_broker
from skiff.testing.wire import BrokerWire, with_wire
from tests.interop.test_grpc_client import rmq5_python, run_client

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).resolve().parent / "grpc" / "lite_client.py"
PARENT, WILDCARD, EXPLICIT = "GLiteParent", "G-lite-wildcard", "G-lite-simple"
LITE_TOPICS = 100
RESYNC_S = 30
"""The Python client's first COMPLETE_ADD (its true subscription set) comes this long after start."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    rmq5_python()
    port = free_port()
    with Cluster(tmp_path_factory.mktemp("grpc-lite"), broker_args=[f"--grpcServerPort={port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]

        async def create(wire: BrokerWire) -> None:
            header = CreateTopicRequestHeader(PARENT, "TBW102", 4, 4, 6, "SINGLE_TAG", attributes="+message.type=LITE")
            resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            for group, attributes in ((WILDCARD, {"+lite.sub.wildcard": "true", "+lite.bind.topic": PARENT}),
                                      (EXPLICIT, {"+lite.bind.topic": PARENT})):
                config = SubscriptionGroupConfig(group, attributes=attributes)
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
        with_wire(c.broker_addr(), create)
        yield c


def test_official_lite_consumers(cluster: Cluster, tmp_path: Path):
    r = run_client(cluster, tmp_path, "push_wildcard", "simple_split_name", script=SCRIPT, parent=PARENT,
                   wildcard_group=WILDCARD, group=EXPLICIT, count=LITE_TOPICS)

    push = r["push_wildcard"]
    ids = [g["id"] for g in push["got"]]
    assert len(push["sent"]) == 3 * LITE_TOPICS and sorted(ids) == sorted(push["sent"])  # every message, once
    assert {g["topic"] for g in push["got"]} == {PARENT} and {g["attempt"] for g in push["got"]} == {1}
    for i in range(LITE_TOPICS):
        mine = [g["body"] for g in push["got"] if g["lite"] == f"lite-{i}"]
        assert mine == [f"{i}:{k}" for k in range(3)]  # in order per lite topic

    simple = r["simple_split_name"]
    assert simple["quota"] == 2000  # from the Settings: with 0 every subscribe_lite would raise
    assert [(g["lite"], g["body"], g["topic"]) for g in simple["got"]] == [
        ("py-lite-topic", f"b{k}", PARENT) for k in range(3)]
    assert simple["first_after_s"] < RESYNC_S - 5 and simple["extra"] == []  # not "p" or "y", nor after unsubscribe


def test_lite_consumers_receive_lite_topics_of_two_brokers_of_one_host(cluster: Cluster, tmp_path: Path):
    """Broker B (127.0.0.1 too, its own grpcServerPort: the client finds it through the route, which
    names B's advertised endpoint) holds the parent too. A LitePushConsumer subscribes
    10 lite topics with subscribe_lite, which it syncs with its access point A only, and its producer
    sends to both brokers' queues in turn: A forwards each message to its lite topic's owner and the
    subscription to B, so every message arrives once, in order per lite topic, each lite topic stored
    on its owner alone. A LiteSimpleConsumer, which receives from A alone, gets two rounds of B's lite
    topics as well as A's through A, its acks reaching B."""
    parent, group, simple_group, count = "GLiteTwo", "G-lite-two", "G-lite-two-simple", 10
    # a parent of its own: a broker reuses a parent's route for LITE_ROUTE_CACHE_S, and PARENT's was looked
    # up before B existed
    with start_broker(tmp_path / "b", cluster.namesrv_addr, f"--grpcServerPort={free_port()}",
                      name="broker-b") as b:
        async def create(wire: BrokerWire) -> None:
            header = CreateTopicRequestHeader(parent, "TBW102", 4, 4, 6, "SINGLE_TAG", attributes="+message.type=LITE")
            assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == 0
            for name in (group, simple_group):
                config = SubscriptionGroupConfig(name, attributes={"+lite.bind.topic": parent})
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
        for addr in (cluster.broker_addr(), b.addr):
            with_wire(addr, create)
        r = run_client(cluster, tmp_path, "push_two_brokers", "simple_two_brokers", script=SCRIPT, parent=parent,
                       group=group, simple_group=simple_group, count=count)
        names = [f"two-{i}" for i in range(count)]
        queues = sorted((broker, i) for broker in ("broker-a", "broker-b") for i in range(4))
        owners = {n: queues[consistent_hash(java_string_hash(n), len(queues))][0] for n in names}
        assert set(owners.values()) == {"broker-a", "broker-b"}  # the lite topics are spread over both brokers
        stored: dict[str, list[str]] = {}

        async def look(broker: str, wire: BrokerWire) -> None:
            for n in names:
                if await wire.pull_messages("G-look", f"%LMQ%|{parent}|{n}", 0):
                    stored.setdefault(n, []).append(broker)
        with_wire(cluster.broker_addr(), lambda w: look("broker-a", w))
        with_wire(b.addr, lambda w: look("broker-b", w))
        assert stored == {n: [owners[n]] for n in names}  # each on its owner alone, whichever broker it was sent to
    push = r["push_two_brokers"]
    assert len(push["sent"]) == 3 * count and sorted(g["id"] for g in push["got"]) == sorted(push["sent"])  # once
    for name in names:
        assert [g["body"] for g in push["got"] if g["lite"] == name] == [f"{name}:{k}" for k in range(3)]
    simple_names = [f"simple-two-{i}" for i in range(count)]
    assert {queues[consistent_hash(java_string_hash(n), len(queues))][0] for n in simple_names} == {
        "broker-a", "broker-b"}
    for k, rnd in enumerate(r["simple_two_brokers"]["rounds"]):
        assert sorted(g["id"] for g in rnd["got"]) == sorted(rnd["sent"])  # each once, B's lite topics too
        assert sorted(g["body"] for g in rnd["got"]) == sorted(f"{n}:{k}" for n in simple_names)
