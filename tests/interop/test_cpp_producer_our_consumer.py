"""The RocketMQ C++ client's producer (PyPI `rocketmq` 0.4.4, its own venv) -> our push
consumers, through real `skiff` processes: every message it sent arrives once,
with tags, keys, user properties, its message id and body intact (a compressed
body and the members of a C++ batch included); tag filtering holds; and what it
sends in order per key, our orderly consumer gets in that order."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.client import AsyncPushConsumer, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumeStatus
from skiff.testing.cluster import Cluster
from tests.integration.consumer_kit import config, create_topic, run, wait_caught_up, wait_for
from tests.interop._cpp import cpp_python, produce

pytestmark = pytest.mark.interop

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cpp_python()  # skip early when the client is missing
    with Cluster(tmp_path_factory.mktemp("cpp-to-ours")) as c:
        yield c


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def seen_by(got: list[Any]) -> dict[str, Any]:
    by_id: dict[str, Any] = {}
    for m in got:
        assert m.msg_id not in by_id, f"{m.msg_id} arrived twice"
        by_id[m.msg_id] = m
    return by_id


def test_cpp_messages_arrive_intact_and_filtered(cluster: Cluster, home: Path) -> None:
    ns, topic = cluster.namesrv_addr, "CppToOurs"
    run(create_topic(ns, topic, 4))
    specs = [{"body": f"message {i} ✓", "tags": ("TagA", "TagB", "TagC")[i % 3], "keys": f"key-{i} shared",
              "props": {"region": f"eu-{i}"}} for i in range(12)]
    specs.append({"body": "z" * 20_000, "tags": "TagA", "keys": "big", "props": {"region": "big"}})
    sent = produce(home, ns, topic, specs)
    batch_specs = [{"body": f"batch {i}", "tags": "TagB", "keys": f"batch-{i}", "props": {"region": "batch"}}
                   for i in range(5)]
    produce(home, ns, topic, batch_specs, mode="batch")
    wanted = {r["msg_id"]: s for r, s in zip(sent, specs) if s["tags"] != "TagC"}
    wanted_batch = {s["body"]: s for s in batch_specs}

    async def consume() -> list[Any]:
        got: list[Any] = []
        c = AsyncPushConsumer("CG-cpp-to-ours", client_config=config(ns, "ours"), consume_from_where=FIRST)
        c.subscribe(topic, "TagA || TagB")

        async def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(listener)
        await c.start()
        try:
            await wait_for(lambda: len(got) >= len(wanted) + len(wanted_batch), "every TagA and TagB message")
            await wait_caught_up(c, ns, topic)  # past every message: a TagC or a duplicate would be here
        finally:
            await c.shutdown()
        return got

    by_id = seen_by(run(consume()))
    assert len(by_id) == len(wanted) + len(wanted_batch)
    for msg_id, spec in wanted.items():
        m = by_id[msg_id]
        assert (m.topic, m.tags, m.body.decode(), m.properties.get("region")) == (
            topic, spec["tags"], spec["body"], spec["props"]["region"])
        assert m.keys == spec["keys"].split()
    batch = {m.body.decode(): m for m in by_id.values() if m.body.startswith(b"batch ")}
    assert set(batch) == set(wanted_batch), "the C++ batch arrives as its members"
    for body, m in batch.items():
        assert (m.tags, m.keys, m.properties.get("region")) == ("TagB", [wanted_batch[body]["keys"]], "batch")


def test_cpp_orderly_sends_are_consumed_in_order(cluster: Cluster, home: Path) -> None:
    ns, topic = cluster.namesrv_addr, "CppToOursOrderly"
    run(create_topic(ns, topic, 4))
    keys, steps = 6, 8
    specs = [{"body": f"k{k}:{s}", "keys": f"k{k}", "arg": k} for s in range(steps) for k in range(keys)]
    sent = produce(home, ns, topic, specs, mode="orderly")
    assert len(sent) == len(specs)

    async def consume() -> dict[str, list[int]]:
        order: dict[str, list[int]] = defaultdict(list)
        queues: dict[str, set[int]] = defaultdict(set)
        c = AsyncPushConsumer("CG-cpp-to-ours-orderly", client_config=config(ns, "ours-orderly"),
                              consume_from_where=FIRST)
        c.subscribe(topic, "*")

        def listener(msgs: list[Any], ctx: Any) -> ConsumeOrderlyStatus:
            for m in msgs:
                key, _, step = m.body.decode().partition(":")
                order[key].append(int(step))
                queues[key].add(m.queue_id)
            time.sleep(0.001)
            return ConsumeOrderlyStatus.SUCCESS

        c.register_orderly_listener(listener)
        await c.start()
        try:
            await wait_for(lambda: sum(len(v) for v in order.values()) >= keys * steps, "every step")
        finally:
            await c.shutdown()
        assert all(len(q) == 1 for q in queues.values()), "the C++ selector keeps a key on one queue"
        return order

    assert run(consume()) == {f"k{k}": list(range(steps)) for k in range(keys)}
