"""The official RocketMQ 5.x Python client (PyPI rocketmq-python-client 5.1.2, unchanged, in
its own venv: it vendors protos that clash with ours) against a real `skiff broker`'s gRPC
endpoint, and messages crossing between gRPC and the remoting protocol.

The scenarios run in tests/interop/grpc/client.py under SKIFF_RMQ5_PYTHON, grouped
into few processes; assertions here are on what they saw. Short settings keep it quick:
invisible times from 1 s, retry delays of 1 s, 2 retries, 1 s transaction checks, push
consumers' messages hidden 1.5 s at a time and renewed 1 s ahead.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from skiff.common.message import Message
from skiff.common.names import dlq_topic, pop_retry_topic
from skiff.common.properties import Prop
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port, start_broker
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, with_wire
from tests.interop._cpp import cpp_python, produce, run_script

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "grpc" / "client.py"
DEFAULT_PYTHON = REPO / "build" / "venv-rocketmq5" / "bin" / "python"
MAX_RETRIES = 2
TOPICS = ("GNormal", "GFifo", "GDelay", "GTx", "GInv", "GFilter", "GShare", "GRestart", "GPush", "GPushFifo", "GCrossIn",
          "GCrossOut", "GFifoGroups", "GPushMany")


def rmq5_python() -> str:
    path = os.environ.get("SKIFF_RMQ5_PYTHON") or str(DEFAULT_PYTHON)
    if not Path(path).exists():
        pytest.skip(f"the RocketMQ 5.x Python client is not installed: SKIFF_RMQ5_PYTHON is unset and "
                    f"{DEFAULT_PYTHON} is missing (run `make test`, which builds it)")
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    rmq5_python()
    port = free_port()
    args = [f"--grpcServerPort={port}", "--enablePropertyFilter=true", "--minInvisibleTimeMillsForRecv=1000",
            "--reviveInterval=200", f"--maxReconsumeTimes={MAX_RETRIES}", "--popStatePersistInterval=200",
            "--messageDelayLevel=" + " ".join(["1s"] * 18), "--transactionTimeOut=1000",
            "--transactionCheckInterval=1000", "--defaultInvisibleTimeMills=1500", "--renewAheadTimeMillis=1000",
            "--renewSchedulePeriodMillis=200"]
    with Cluster(tmp_path_factory.mktemp("grpc"), broker_args=args) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]

        async def create(wire: BrokerWire):
            for topic in TOPICS:
                header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG")
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            header = CreateTopicRequestHeader("GPriority", "TBW102", 4, 4, 6, "SINGLE_TAG",
                                              attributes="+message.type=PRIORITY")
            resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            for group in ("G-push-fifo", "G-fifo-groups"):
                orderly = SubscriptionGroupConfig(group, retry_max_times=MAX_RETRIES, consume_message_orderly=True)
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orderly.to_json())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
        with_wire(c.broker_addr(), create)
        yield c


def run_client(cluster: Cluster | str, tmp_path: Path, *scenarios: str, timeout_s: float = 120,
               script: Path | str = SCRIPT, **extra: Any) -> dict:
    """Run scenarios of ``script`` against ``cluster``'s gRPC endpoint (or the endpoint given)."""
    endpoint = cluster if isinstance(cluster, str) else cluster.grpc_endpoint  # type: ignore[attr-defined]
    spec = {"endpoint": endpoint, "scenarios": list(scenarios), **extra}
    env = {**os.environ, "HOME": str(tmp_path)}  # the client logs under $HOME/logs
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([rmq5_python(), str(script), json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=tmp_path)
    assert proc.returncode == 0, f"client failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_producer_and_simple_consumer(cluster: Cluster, tmp_path: Path):
    r = run_client(cluster, tmp_path, "send_receive", "fifo", "delay", "transaction", "invisible", "filters",
                   "share", "errors")

    got = {m["body"]: m for m in r["send_receive"]["got"]}
    assert set(got) == {"n0", "n1"} and r["send_receive"]["again"] == 0
    n0 = got["n0"]
    assert (n0["tag"], n0["keys"], n0["props"], n0["attempt"], n0["topic"]) == (
        "TagA", ["k0", "k1"], {"color": "red"}, 1, "GNormal")
    assert sorted(m["id"] for m in got.values()) == sorted(r["send_receive"]["sent"])

    for group in ("g1", "g2"):  # FIFO: one queue per group, and its order kept
        mine = [m for m in r["fifo"]["got"] if m["group"] == group]
        assert [m["body"] for m in mine] == [f"{group}-{i}" for i in range(6)]

    d = r["delay"]
    assert d["early"] == [] and [m["body"] for m in d["got"]] == ["later"]
    assert d["arrived"] >= d["at"] - 0.5 and d["got"][0]["delivery"] in (d["at"], d["at"] * 1000)
    assert d["recalled"][0] == d["recalled"][1]

    assert r["transaction"]["got"] == ["commit", "unknown"] and "unknown" in r["transaction"]["checked"]

    inv = r["invisible"]
    assert sorted(m["body"] for m in inv["first"]) == ["again", "changed"]
    assert sorted((m["body"], m["attempt"]) for m in inv["back"]) == [("again", 2), ("changed", 2)]

    assert r["filters"] == {"tag": ["f0", "f2", "f4"], "sql": ["f3", "f4"]}

    a, b = r["share"]["a"], r["share"]["b"]
    assert sorted(a + b, key=lambda s: int(s[1:])) == [f"s{i}" for i in range(20)] and a and b

    e = r["errors"]
    assert "failed to fetch topic:NoSuchTopic route" in e["unknown_topic"]  # the client's wording of TOPIC_NOT_FOUND
    assert e["too_large"]["code"] == "MESSAGE_BODY_TOO_LARGE" and e["empty_body"]["code"] == "MESSAGE_BODY_EMPTY"
    assert e["bad_tag"]["code"] == "ILLEGAL_MESSAGE_TAG" and e["no_messages"]["code"] == "MESSAGE_CORRUPTED"
    assert e["unknown_topic_raw"]["code"] == "TOPIC_NOT_FOUND" and e["route_unknown"]["code"] == "TOPIC_NOT_FOUND"
    assert e["no_client_id"]["code"] == "CLIENT_ID_REQUIRED" and e["bad_handle"]["code"] == "INVALID_RECEIPT_HANDLE"
    assert "grpc" in e["malformed"]
    assert e["unimplemented"]["code"] == "ILLEGAL_CONSUMER_GROUP"  # SyncLiteSubscription is served: no group named
    o = e["offsets"]  # GFifo's queues hold the 12 FIFO messages, each group's in one queue, in order
    assert o["begin"] == [0] * 4 and sum(o["end"]) == 12 and o["bad_queue"]["code"] == "BAD_REQUEST"
    # no commit yet on a queue whose first offset is kept: 0, by the rule remoting's QUERY_CONSUMER_OFFSET follows
    assert o["before_update"]["code"] == "OK" and o["update"]["code"] == "OK"
    assert (o["after_update"]["code"], o["after_update"]["offset"]) == ("OK", 1)
    assert [p["next"] for p in o["pull"]] == o["end"]
    assert sorted(b for p in o["pull"] for b in p["bodies"]) == sorted(f"{g}-{i}" for g in ("g1", "g2")
                                                                        for i in range(6))
    for p in o["pull"]:
        assert p["status"] == ("OK" if p["bodies"] else "MESSAGE_NOT_FOUND")
        for g in ("g1", "g2"):
            mine = [b for b in p["bodies"] if b.startswith(g)]
            assert mine in ([], [f"{g}-{i}" for i in range(6)])

    async def pull(wire: BrokerWire):  # sent over gRPC, consumed over remoting: ids, tags, keys, properties
        stored = [m for q in range(4) for m in await wire.pull_messages("G-ours", "GNormal", q)]
        n = next(m for m in stored if m.body == b"n0")
        assert (n.tags, sorted(n.keys), n.properties["color"]) == ("TagA", ["k0", "k1"], "red")  # the client keeps a set
        assert n.properties[Prop.UNIQ_KEY] == n0["id"]
    with_wire(cluster.broker_addr(), pull)


def test_push_consumers_concurrent_redelivery_dead_letters_and_fifo(cluster: Cluster, tmp_path: Path):
    r = run_client(cluster, tmp_path, "push", "push_fifo", max_attempts=MAX_RETRIES + 1)
    for group in ("g1", "g2"):  # a consumeMessageOrderly group: each message group in order, once each
        assert [b for b, _ in r["push_fifo"]["calls"] if b.startswith(group)] == [f"{group}-{i}" for i in range(5)]
    # FIFO consumers retry locally (the same delivery, so attempt 1 each time) up to the max attempts the
    # settings reply gave, then forward to the DLQ themselves (ForwardMessageToDeadLetterQueue).
    assert [a for b, a in r["push_fifo"]["calls"] if b == "fail-fifo"] == [1] * (MAX_RETRIES + 1)
    calls = r["push"]["calls"]
    assert sorted(b for b, _ in calls if b.startswith("ok")) == [f"ok{i}" for i in range(5)]
    assert [a for b, a in calls if b == "fail-always"] == list(range(1, MAX_RETRIES + 2))
    # A listener busy for 3 s with a message hidden 1.5 s at a time: renewed, so delivered once.
    assert [(b, a) for b, a in calls if b == "slow"] == [("slow", 1)]

    async def dead(wire: BrokerWire):
        return await wire.pull_messages("G-watch", dlq_topic("G-push"), 0)
    found = with_wire_result(cluster, dead)
    assert [(m.body, m.reconsume_times) for m in found] == [(b"fail-always", MAX_RETRIES + 1)]

    async def dead_fifo(wire: BrokerWire):
        return await wire.pull_messages("G-watch", dlq_topic("G-push-fifo"), 0)
    assert [m.body for m in with_wire_result(cluster, dead_fifo)] == [b"fail-fifo"]


def test_fifo_message_groups_keep_their_order_across_a_consumer_restart(cluster: Cluster, tmp_path: Path):
    """20 message groups x 50 messages, a consumeMessageOrderly group's SimpleConsumer: each
    group's messages are received and acked in send order; the consumer stops with messages
    received and not acked, and its successor gets those again before anything after them."""
    r = run_client(cluster, tmp_path, "fifo_groups", topic="GFifoGroups", group="G-fifo-groups")["fifo_groups"]
    log, left = r["log"], set(r["left"])
    expected = {f"q{g:02d}": [f"q{g:02d}-{i:02d}" for i in range(50)] for g in range(20)}
    acks = [body for kind, body, _ in log if kind == "ack"]
    firsts = list(dict.fromkeys(body for kind, body, _ in log if kind == "recv"))
    for group, bodies in expected.items():
        assert [b for b in acks if b.startswith(group)] == bodies, group
        assert [b for b in firsts if b.startswith(group)] == bodies, group
    seen, done, again = set(), set(), []
    for kind, body, attempt in log:
        if kind == "ack":
            done.add(body)
            continue
        assert body not in done, f"{body} received after it was acked"
        if body in seen:
            again.append((body, attempt))
        seen.add(body)
    assert left and {b for b, _ in again} == left and all(a >= 2 for _, a in again)
    # the successor's first receipts of each group that was left blocked are its un-acked messages, in order
    after = [body for kind, body, _ in log[r["restart_at"]:] if kind == "recv"]
    for group in {b[:3] for b in left}:
        mine = [b for b in after if b.startswith(group)]
        held = sorted(b for b in left if b.startswith(group))
        assert mine[:len(held)] == held, group


def test_a_push_consumer_takes_a_thousand_messages_retrying_failures(cluster: Cluster, tmp_path: Path):
    """1,000 messages, the listener fails the first delivery of every tenth: each message ends
    consumed, the failed ones on a second delivery (their retry after the group's backoff)."""
    calls = run_client(cluster, tmp_path, "push_many", topic="GPushMany", group="G-push-many")["push_many"]["calls"]
    bodies = [f"m{i:04d}" for i in range(1000)]
    failing = set(bodies[::10])
    first = {}
    for body, attempt in calls:
        first.setdefault(body, attempt)
    assert sorted(first) == bodies and set(first.values()) == {1}
    retried = {body for body, attempt in calls if attempt >= 2}
    assert failing <= retried, sorted(failing - retried)[:10]
    assert len([c for c in calls if c[0] in failing and c[1] == 1]) == len(failing)  # each failed once


def test_priority_messages_are_received_highest_first_and_keep_it_when_retried(cluster: Cluster, tmp_path: Path):
    """A PRIORITY topic (+message.type=PRIORITY, 4 queues: priorities 0-3): a backlog of 40 mixed
    priorities is received highest first, each priority in send order; a message left un-acked
    comes back as a retry ahead of every message of a lower priority."""
    spec = {"topic": "GPriority", "group": "G-priority"}
    first = run_client(cluster, tmp_path, "priority_backlog", **spec)["priority_backlog"]["got"]
    assert [(b, p, a) for b, p, a in first] == [(f"p3-{i:02d}", 3, 1) for i in (3, 7, 11, 15)]
    retry = pop_retry_topic("G-priority", "GPriority")

    async def revived(wire: BrokerWire):
        resp = await wire.call(RequestCode.GET_MAX_OFFSET, {"topic": retry, "queueId": 3})
        return resp.code == ResponseCode.SUCCESS and int(resp.ext("offset") or 0) > 0
    with_wire(cluster.broker_addr(), lambda wire: eventually(lambda: revived(wire), 15, "the retry of p3-03"))
    rest = run_client(cluster, tmp_path, "priority_rest", left=37, **spec)["priority_rest"]["got"]
    assert tuple(rest[0]) == ("p3-03", 3, 2)  # the retry keeps its priority: before the other priorities' backlog
    order = [(p, int(b[3:])) for b, p, _ in rest[1:]]
    assert order == sorted(order, key=lambda po: (-po[0], po[1])) and len(order) == 36


def test_restart_under_a_simple_consumer_loses_nothing(cluster: Cluster, tmp_path: Path):
    async def send(wire: BrokerWire):  # sent over remoting, consumed over gRPC
        for i in range(4):
            resp = await wire.send(Message.of("GRestart", f"r{i}".encode(), tags="R"), queue_id=i)
            assert resp.code == ResponseCode.SUCCESS
    with_wire(cluster.broker_addr(), send)
    before = run_client(cluster, tmp_path, "restart_before")["restart_before"]
    assert len(before["acked"]) == 2 and len(before["left"]) == 2
    cluster.restart_broker(0)
    after = run_client(cluster, tmp_path, "restart_after", tx=before["tx"],
                       tx_message=before["tx_message"])["restart_after"]
    assert after["commit"]["code"] == "OK"  # the half found by its id after the restart
    assert after["got"] == sorted([*before["left"], "open-tx"])


def test_messages_cross_between_grpc_and_the_cpp_client(cluster: Cluster, tmp_path: Path):
    cpp_python()
    produce(tmp_path / "cpp", cluster.namesrv_addr, "GCrossIn",
            [{"body": "from-cpp", "tags": "CT", "keys": "ck", "props": {"color": "blue"}}])
    r = run_client(cluster, tmp_path, "cross")["cross"]
    [m] = r["got"]
    assert (m["body"], m["tag"], m["keys"], m["props"], m["attempt"]) == ("from-cpp", "CT", ["ck"],
                                                                           {"color": "blue"}, 1)
    pulled = run_script(tmp_path / "cpp", "pull_consumer", {"namesrv": cluster.namesrv_addr, "group": "CG-cross",
                                                            "topic": "GCrossOut", "expected": 1, "props": ["color"]})
    [c] = pulled["messages"]
    assert (c["id"], c["body"], c["tags"], c["keys"], c["props"]) == (r["sent"], "from-grpc", "GT", "gk",
                                                                       {"color": "green"})


def test_a_client_of_one_broker_reaches_topics_on_another(cluster: Cluster, tmp_path: Path):
    """A second broker (127.0.0.2, the same grpcServerPort): routes name each broker's own
    endpoint, so sends and receives through broker A's access point reach broker B's queues."""
    port = int(cluster.grpc_endpoint.rsplit(":", 1)[1])  # type: ignore[attr-defined]
    with start_broker(tmp_path / "b", cluster.namesrv_addr, f"--grpcServerPort={port}", name="broker-b",
                      host="127.0.0.2") as b:
        async def create(wire: BrokerWire, topics: tuple[str, ...]):
            for topic in topics:
                header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG")
                assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == 0
        with_wire(cluster.broker_addr(), lambda w: create(w, ("GSpread",)))
        with_wire(b.addr, lambda w: create(w, ("GSpread", "GOnlyB")))
        r = run_client(cluster, tmp_path, "spread")["spread"]
        assert r == {"spread": sorted(f"sp{i}" for i in range(12)), "only_b": ["b0", "b1"]}

        def stored(addr: str, topic: str) -> list[bytes]:
            box: list[bytes] = []

            async def pull(wire: BrokerWire):
                for q in range(4):
                    box.extend(m.body for m in await wire.pull_messages("G-look", topic, q))
            with_wire(addr, pull)
            return box
        on_a, on_b = stored(cluster.broker_addr(), "GSpread"), stored(b.addr, "GSpread")
        assert on_a and on_b and len(on_a) + len(on_b) == 12
        assert sorted(stored(b.addr, "GOnlyB")) == [b"b0", b"b1"]


def with_wire_result(cluster: Cluster, fn):  # type: ignore[no-untyped-def]
    box: list[Any] = []

    async def run(wire: BrokerWire):
        box.append(await eventually(lambda: fn(wire), 15, "the dead letter"))
    with_wire(cluster.broker_addr(), run)
    return box[0]
