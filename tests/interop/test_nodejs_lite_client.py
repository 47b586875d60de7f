"""Lite topics (RocketMQ 5.5, RIP-83) with the official RocketMQ 5.x Node.js client (npm
rocketmq-client-nodejs, pinned by tests/interop/nodejs/package-lock.json), a second implementation
beside the Python one: a LitePushConsumer subscribing lite topics one by one (subscribeLite) receives
every message of them once, in order per lite topic.

The scenario runs in tests/interop/nodejs/lite_client.js.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.wire import BrokerWire, with_wire
from tests.interop.test_nodejs_client import cluster, run_node  # noqa: F401 - the module's cluster fixture

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).resolve().parent / "nodejs" / "lite_client.js"
PARENT, GROUP = "NodeLiteParent", "G-node-lite"
LITE_TOPICS, EACH = 20, 3


def test_a_lite_push_consumer_receives_its_lite_topics_in_order(cluster: Cluster, tmp_path: Path):  # noqa: F811
    async def create(wire: BrokerWire) -> None:
        header = CreateTopicRequestHeader(PARENT, "TBW102", 4, 4, 6, "SINGLE_TAG", attributes="+message.type=LITE")
        assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
        config = SubscriptionGroupConfig(GROUP, attributes={"lite.bind.topic": PARENT})
        resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    with_wire(cluster.broker_addr(), create)
    r = run_node(cluster, tmp_path, SCRIPT, parent=PARENT, consumerGroup=GROUP, count=LITE_TOPICS, each=EACH)
    assert sorted(g["id"] for g in r["got"]) == sorted(r["sent"]) and len(r["sent"]) == LITE_TOPICS * EACH
    assert {g["topic"] for g in r["got"]} == {PARENT}
    for i in range(LITE_TOPICS):
        assert [g["body"] for g in r["got"] if g["lite"] == f"node-{i}"] == [f"{i}:{k}" for k in range(EACH)]
