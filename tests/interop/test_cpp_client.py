"""The real RocketMQ C++ client (PyPI `rocketmq` 0.4.4) against real `skiff namesrv` and
`skiff broker` processes: every send mode, every consumer kind, and a broker restart.

Assertions are on the data: message ids (the client's UNIQ_KEY) and bodies.
The broker's delay levels are shortened (level 1 = 1 s, level 2 = 2 s, the retry
levels 3+ = 1 s) so retries and delays take seconds, not minutes.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

import pytest

from skiff.common.names import retry_topic
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.wire import BrokerWire, with_wire
from tests.interop._cpp import PushConsumer, cpp_python, produce, run_script, start_script

pytestmark = pytest.mark.interop

DELAY_LEVELS = "1s 2s " + " ".join(["1s"] * 16)


def create_topic(cluster: Cluster, topic: str, queues: int) -> None:
    async def create(wire: BrokerWire):
        header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6, "SINGLE_TAG")
        assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
    with_wire(cluster.broker_addr(), create)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    cpp_python()  # skip early when the client is missing
    with Cluster(tmp_path_factory.mktemp("cpp"), broker_args=[f"--messageDelayLevel={DELAY_LEVELS}"]) as c:
        yield c


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def bodies(messages) -> list[str]:
    return sorted(m["body"] for m in messages)


def test_sync_async_and_oneway_sends(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    sync = produce(home, ns, "CppSends", [{"body": f"sync-{i}", "keys": f"s{i}"} for i in range(5)])
    asynced = produce(home, ns, "CppSends", [{"body": f"async-{i}", "keys": f"a{i}"} for i in range(5)], mode="async")
    produce(home, ns, "CppSends", [{"body": f"oneway-{i}", "keys": f"o{i}"} for i in range(5)], mode="oneway")
    assert {r["status"] for r in sync + asynced} == {"OK"} and len(asynced) == 5
    consumer = PushConsumer(home, ns, "CG-sends", "CppSends")
    try:
        got = consumer.wait_for(15)
    finally:
        consumer.stop()
    assert bodies(got) == sorted([f"{kind}-{i}" for kind in ("sync", "async", "oneway") for i in range(5)])
    ids = {m["keys"]: m["id"] for m in got}
    assert {r["keys"]: r["msg_id"] for r in sync + asynced} == {k: v for k, v in ids.items() if k[0] in "sa"}
    assert len(set(ids.values())) == 15


def test_batch_send_plain_and_compressed(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    small = [{"body": f"batch-{i}", "keys": f"b{i}"} for i in range(10)]
    large = [{"body": f"big-{i}-" + "x" * 1000, "keys": f"g{i}"} for i in range(6)]  # > 4 KiB: compressed whole
    for batch in (small, large):
        [result] = produce(home, ns, "CppBatch", batch, mode="batch")
        assert result["status"] == "OK"
    got = run_script(home, "pull_consumer", {"namesrv": ns, "group": "CG-batch", "topic": "CppBatch",
                                             "expected": 16})["messages"]
    assert bodies(got) == sorted(m["body"] for m in small + large)
    assert len({m["id"] for m in got}) == 16


def test_ordered_send_and_orderly_consumer_keep_order_per_key(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    messages = [{"body": f"{key}:{seq}", "keys": f"k{key}", "arg": key} for seq in range(15) for key in range(4)]
    results = produce(home, ns, "CppOrdered", messages, mode="orderly")
    assert {r["status"] for r in results} == {"OK"}
    consumer = PushConsumer(home, ns, "CG-ordered", "CppOrdered", orderly=True)
    try:
        got = consumer.wait_for(60)
    finally:
        consumer.stop()
    per_key = collections.defaultdict(list)
    queues = collections.defaultdict(set)
    for m in got:
        key, seq = m["body"].split(":")
        per_key[key].append(int(seq))
        queues[key].add(m["queue_id"])
    assert {k: seqs for k, seqs in per_key.items()} == {str(k): list(range(15)) for k in range(4)}
    assert all(len(q) == 1 for q in queues.values())  # the selector kept each key on one queue


def test_tag_expression_receives_exactly_the_matching_messages(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    tags = ["TagA", "TagB", "TagC", "TagD"]
    results = produce(home, ns, "CppTags", [{"body": f"t{i}", "tags": tags[i % 4], "keys": f"t{i}"}
                                            for i in range(20)])
    wanted = {r["msg_id"] for r, i in zip(results, range(20)) if tags[i % 4] in ("TagA", "TagC")}
    consumer = PushConsumer(home, ns, "CG-tags", "CppTags", expression="TagA || TagC")
    try:
        consumer.wait_for(10)
        # A fence on every queue: once each is consumed, everything sent before it was too.
        fences = produce(home, ns, "CppTags", [{"body": "fence", "tags": "TagC"} for _ in range(8)])
        fence_ids = {r["msg_id"] for r in fences}
        consumer.wait(lambda: fence_ids <= {m["id"] for m in consumer.messages}, 30, "the fences")
        got = [m for m in consumer.snapshot() if m["id"] not in fence_ids]
    finally:
        consumer.stop()
    assert sorted(m["id"] for m in got) == sorted(wanted)
    assert {m["tags"] for m in got} == {"TagA", "TagC"}


def test_pull_consumer(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    results = produce(home, ns, "CppPull", [{"body": f"p{i}", "tags": "A" if i % 3 else "B"} for i in range(12)])
    got = run_script(home, "pull_consumer", {"namesrv": ns, "group": "CG-pull", "topic": "CppPull",
                                             "expected": 12})["messages"]
    assert sorted(m["id"] for m in got) == sorted(r["msg_id"] for r in results)
    assert len({m["queue_id"] for m in got}) > 1
    only_b = run_script(home, "pull_consumer", {"namesrv": ns, "group": "CG-pull-b", "topic": "CppPull",
                                                "expression": "B", "expected": 4})["messages"]
    assert bodies(only_b) == ["p0", "p3", "p6", "p9"]


def test_broadcasting_gives_every_member_every_message(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    topic = "CppBroadcast"
    produce(home, ns, topic, [{"body": "warm-up"}])  # the topic exists before the consumers ask for its route
    a = PushConsumer(home / "a", ns, "CG-broadcast", topic, broadcast=True)
    b = PushConsumer(home / "b", ns, "CG-broadcast", topic, broadcast=True)
    try:
        # A broadcasting C++ consumer without a local offset starts at each queue's end, so
        # wait until both serve every queue before the messages that count are sent.
        _probe_until(home, ns, topic, [a, b], lambda owners: all(len(q) == 4 for q in owners))
        results = produce(home, ns, topic, [{"body": f"all-{i}"} for i in range(8)])
        ids = {r["msg_id"] for r in results}
        for consumer in (a, b):
            consumer.wait(lambda c=consumer: ids <= {m["id"] for m in c.messages}, 30, "every message")
            assert sorted(m["body"] for m in consumer.snapshot() if m["id"] in ids) == [f"all-{i}" for i in range(8)]
    finally:
        a.stop()
        b.stop()


def test_two_consumers_in_one_group_share_the_queues(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    topic, group = "CppShared", "CG-shared"
    produce(home, ns, topic, [{"body": "warm-up", "keys": "warm"}])  # creates the topic's 4 queues
    a = PushConsumer(home / "a", ns, group, topic)
    b = PushConsumer(home / "b", ns, group, topic)
    try:
        # Rebalanced: two rounds of probes in a row split the queues the same way, both sides non-empty.
        owners = _probe_until(home, ns, topic, [a, b], lambda qs: all(qs) and not qs[0] & qs[1])
        assert owners[0] | owners[1] == {0, 1, 2, 3}
        results = produce(home, ns, topic, [{"body": f"shared-{i}", "keys": f"s{i}"} for i in range(40)])
        sent = {r["msg_id"] for r in results}

        def delivered():
            return [m for c in (a, b) for m in c.snapshot() if m["id"] in sent]
        a.wait(lambda: len({m["id"] for m in delivered()}) >= 40, 30, "all 40 delivered")
        got = delivered()
    finally:
        a.stop()
        b.stop()
    counts = collections.Counter(m["id"] for m in got)
    assert set(counts) == sent
    assert [i for i, n in counts.items() if n > 1] == []  # no duplicates
    by_consumer = [{m["queue_id"] for m in c.snapshot() if m["id"] in sent} for c in (a, b)]
    assert by_consumer[0] and by_consumer[1] and not by_consumer[0] & by_consumer[1]


def _probe_until(home: Path, ns: str, topic: str, consumers: list[PushConsumer],
                 settled, timeout_s: float = 60) -> list[set[int]]:
    """Send probe rounds (two messages per queue of the 4) until ``settled`` holds for the
    queues each consumer got a probe of in one round; return those queue sets."""
    deadline = time.monotonic() + timeout_s
    history: list[list[set[int]]] = []
    for round_no in range(1000):
        probes = produce(home, ns, topic, [{"body": f"probe-{round_no}"} for _ in range(8)])
        ids = {r["msg_id"] for r in probes}

        def owners() -> list[set[int]]:
            return [{m["queue_id"] for m in c.snapshot() if m["id"] in ids} for c in consumers]
        consumers[0].wait(lambda: set().union(*owners()) >= {0, 1, 2, 3}, 30, "probes on every queue")
        history.append(owners())
        if settled(history[-1]) and (len(history) < 2 or history[-1] == history[-2]):
            return history[-1]
        assert time.monotonic() < deadline, f"the consumers did not settle: {history[-3:]}"
    raise AssertionError("the consumers did not settle")


def test_reconsume_later_delivers_the_message_again(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    produce(home, ns, "CppRetry", [{"body": "warm-up", "keys": "warm"}])  # routed before the consumer starts
    # The group's retry topic exists from an earlier run, as in any running system: the C++ consumer
    # looks its route up once at start, before the heartbeat that would create it.
    create_topic(cluster, retry_topic("CG-retry"), 1)
    consumer = PushConsumer(home, ns, "CG-retry", "CppRetry", reconsume_later=["again"])
    try:
        [sent] = produce(home, ns, "CppRetry", [{"body": "retry me", "keys": "again"}])
        consumer.wait(lambda: len([m for m in consumer.messages if m["keys"] == "again"]) >= 2, 30, "the retry")
        first, second = [m for m in consumer.snapshot() if m["keys"] == "again"]
    finally:
        consumer.stop()
    assert (first["answer"], second["answer"]) == ("RECONSUME_LATER", "CONSUME_SUCCESS")
    assert first["id"] == second["id"] == sent["msg_id"] and second["body"] == "retry me"
    assert (first["reconsume_times"], second["reconsume_times"]) == (0, 1)
    assert second["topic"] == "CppRetry"  # the client renames %RETRY%<group> back from RETRY_TOPIC


def test_delay_levels(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    produce(home, ns, "CppDelay", [{"body": "warm-up", "keys": "warm"}])  # routed before the consumer starts
    consumer = PushConsumer(home, ns, "CG-delay", "CppDelay")
    try:
        consumer.wait_for(1, 30, "the warm-up")
        sent_at = time.time()
        results = produce(home, ns, "CppDelay", [{"body": "now", "keys": "now"},
                                                 {"body": "level-1", "keys": "d1", "delay": 1},
                                                 {"body": "level-2", "keys": "d2", "delay": 2}])
        consumer.wait_for(4, 30)
        got = [m for m in consumer.snapshot() if m["keys"] != "warm"]
    finally:
        consumer.stop()
    assert sorted(m["id"] for m in got) == sorted(r["msg_id"] for r in results)
    assert sorted(m["body"] for m in got) == ["level-1", "level-2", "now"]
    store_ms = {m["keys"]: m["store_ms"] for m in got}  # a delayed message is stored again when it is due
    assert store_ms["now"] - sent_at * 1000 < 900
    assert store_ms["d1"] - sent_at * 1000 >= 900 and store_ms["d2"] - sent_at * 1000 >= 1900


def test_a_broker_restart_in_the_middle_loses_nothing(cluster: Cluster, home: Path):
    ns = cluster.namesrv_addr
    produce(home, ns, "CppRestart", [{"body": "warm-up"}])  # routed before the consumer starts
    consumer = PushConsumer(home, ns, "CG-restart", "CppRestart")
    spec = {"namesrv": ns, "group": "PG-restart", "topic": "CppRestart", "mode": "sync", "retry_s": 45,
            "interval_ms": 10, "messages": [{"body": f"r{i}", "keys": f"r{i}"} for i in range(300)]}
    producer = start_script(home, "producer", spec)
    try:
        consumer.wait_for(40, 30, "messages before the restart")
        cluster.restart_broker(0)
        out, err = producer.communicate(timeout=90)
        assert producer.returncode == 0, err[-3000:]
        results = json.loads(out.strip().splitlines()[-1])["results"]
        acked = {r["msg_id"] for r in results if r.get("status") == "OK"}
        assert len(acked) == 300, [r for r in results if "error" in r][:3]
        consumer.wait(lambda: acked <= {m["id"] for m in consumer.messages}, 60, "every acknowledged message")
    finally:
        if producer.poll() is None:
            producer.kill()
        consumer.stop()
    assert {m["body"] for m in consumer.snapshot()} == {"warm-up"} | {f"r{i}" for i in range(300)}
