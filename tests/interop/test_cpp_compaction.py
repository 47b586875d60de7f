"""The RocketMQ C++ client (PyPI `rocketmq` 0.4.4) on a compacted topic: the topic is
created with RocketMQ 5's CREATE_TOPIC ``attributes`` field, the C++ producer's
messages without KEYS are refused, and after compaction its pull and push consumers
read the latest message of every key, at their original queue offsets, across the gaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client import AsyncAdmin
from skiff.client._impl.config import ClientConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.wire import BrokerWire, with_wire
from skiff.transport.loop import run_coroutine
from tests.interop._cpp import PushConsumer, cpp_python, produce, run_script

pytestmark = pytest.mark.interop

TOPIC = "CppCompacted"
KEYS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    cpp_python()  # skip early when the client is missing
    with Cluster(tmp_path_factory.mktemp("cpp-compaction"), broker_args=["--flushIntervalCommitLog=50"]) as c:
        yield c


def test_cpp_clients_on_a_compacted_topic(cluster: Cluster, tmp_path: Path) -> None:
    ns, home = cluster.namesrv_addr, tmp_path / "home"

    async def create(wire: BrokerWire) -> None:
        header = CreateTopicRequestHeader(TOPIC, "TBW102", 1, 1, 6, "SINGLE_TAG",
                                          attributes="+cleanup.policy=COMPACTION")
        assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS

    with_wire(cluster.broker_addr(), create)
    refused = run_script(home, "producer", {"namesrv": ns, "group": "PG-cpp-compact", "topic": TOPIC,
                                            "mode": "sync", "messages": [{"body": "no key"}], "retry_s": 5})
    assert "error" in refused["results"][0]
    sent = produce(home, ns, TOPIC, [{"body": f"v{i}", "keys": f"k{i % KEYS}"} for i in range(20)],
                   group="PG-cpp-compact", retry_s=5)
    assert [r["offset"] for r in sent] == list(range(20))

    async def compact() -> None:
        async with AsyncAdmin(client_config=ClientConfig(ns, instance_name="cpp-compact-admin")) as admin:
            (b,) = await admin.compaction(TOPIC, run=True)
            assert b.error is None and b.state.queues[0].cleaned_offset == 20, b

    run_coroutine(compact())
    latest = [(16 + j, f"v{16 + j}") for j in range(KEYS)]
    pulled = run_script(home, "pull_consumer", {"namesrv": ns, "group": "CG-cpp-compact-pull", "topic": TOPIC,
                                                "expected": KEYS})["messages"]
    assert sorted((m["queue_offset"], m["body"]) for m in pulled) == latest
    produce(home, ns, TOPIC, [{"body": "after", "keys": "k1"}], group="PG-cpp-compact")
    consumer = PushConsumer(home, ns, "CG-cpp-compact-push", TOPIC)
    try:
        got = consumer.wait_for(KEYS + 1)
    finally:
        consumer.stop()
    assert sorted((m["queue_offset"], m["body"], m["keys"]) for m in got) == [
        *[(o, b, f"k{o % KEYS}") for o, b in latest], (20, "after", "k1")]
