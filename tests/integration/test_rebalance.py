"""Rebalance while messages flow: a member joins, another leaves, against real
`skiff` processes. Nothing may be lost; a message may arrive twice only in a
queue whose owner changed; an orderly queue never has two consumers at once and
keeps each key's order."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from skiff.client import (
    AsyncProducer,
    AsyncPushConsumer,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    Message,
    MessageQueue,
    SelectByHash,
)
from skiff.testing.cluster import Cluster
from tests.integration.consumer_kit import Delivery, Recorder, assert_all_received, config, create_topic, run, wait_for

TOTAL = 2400
CHUNK = 80
KEYS = 16


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("rebalance-cluster")) as c:
        yield c


def member(ns: str, group: str, name: str, recorder: Recorder, topic: str, *, orderly: bool) -> AsyncPushConsumer:
    c = AsyncPushConsumer(group, client_config=config(ns, name), consume_message_batch_max_size=4,
                          consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c.subscribe(topic, "*")

    def listener(msgs: list[Any], ctx: Any) -> Any:
        start = time.monotonic()
        time.sleep(0.001)  # a little work, so consumption overlaps the moves
        recorder.record(name, msgs, ctx.message_queue, start)
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeStatus.CONSUME_SUCCESS

    if orderly:
        c.register_orderly_listener(listener)
    else:
        c.register_listener(listener)
    return c


async def produce(ns: str, topic: str, sent: list[str], *, ordered: bool) -> None:
    """TOTAL messages in chunks, with a pause between chunks so the flow spans the moves."""
    async with AsyncProducer("rebalance-producer", client_config=config(ns, "producer")) as producer:
        for start in range(0, TOTAL, CHUNK):
            bodies = [f"k{i % KEYS}:{i}" for i in range(start, start + CHUNK)]
            if ordered:
                for body in bodies:
                    key = body.partition(":")[0]
                    await producer.send(Message.of(topic, body, keys=key), selector=SelectByHash(), arg=key)
            else:
                await asyncio.gather(*(producer.send(Message.of(topic, b)) for b in bodies))
            sent += bodies
            await asyncio.sleep(0.03)


async def join_and_leave(ns: str, topic: str, group: str, recorder: Recorder, *, orderly: bool) -> None:
    """A consumes alone; B joins after a third of the messages; A leaves after two thirds."""
    sent: list[str] = []
    a = member(ns, group, "A", recorder, topic, orderly=orderly)
    b = member(ns, group, "B", recorder, topic, orderly=orderly)
    await a.start()
    flow = asyncio.ensure_future(produce(ns, topic, sent, ordered=orderly))
    try:
        await wait_for(lambda: len(sent) >= TOTAL // 3, "a third of the messages sent")
        await b.start()
        await wait_for(lambda: len(sent) >= 2 * TOTAL // 3, "two thirds of the messages sent")
        await a.shutdown()
        await flow
        await wait_for(lambda: recorder.distinct() == TOTAL, f"all {TOTAL} messages")
    finally:
        flow.cancel()
        await a.shutdown()
        await b.shutdown()
    assert_all_received(recorder, sent)
    assert {d.consumer for d in recorder.snapshot()} == {"A", "B"}


def owner_runs(deliveries: list[Delivery]) -> list[tuple[str, list[Delivery]]]:
    """One queue's deliveries in time order, cut into runs of one consumer."""
    runs: list[tuple[str, list[Delivery]]] = []
    for d in sorted(deliveries, key=lambda d: (d.start_s, d.offset)):
        if not runs or runs[-1][0] != d.consumer:
            runs.append((d.consumer, []))
        runs[-1][1].append(d)
    return runs


def test_concurrent_consumers_lose_nothing_and_repeat_only_where_a_queue_moved(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "RebalanceTopic"
        await create_topic(ns, topic, 8)
        rec = Recorder()
        await join_and_leave(ns, topic, "g-rebalance", rec, orderly=False)
        counts = rec.bodies()
        holders: dict[MessageQueue, set[str]] = defaultdict(set)
        for d in rec.snapshot():
            holders[d.mq].add(d.consumer)
        moved = {mq for mq, who in holders.items() if len(who) > 1}
        assert moved, "some queues changed owner"
        repeated = [d for d in rec.snapshot() if counts[d.body] > 1]
        unexplained = [d for d in repeated if d.mq not in moved]
        assert not unexplained, f"repeated in queues that never moved: {unexplained[:3]}"
        print(f"{len(moved)} queues moved; {sum(c - 1 for c in counts.values())} repeated deliveries")

    run(scenario())


def test_orderly_queues_have_one_owner_at_a_time_and_keep_key_order(cluster: Cluster) -> None:
    async def scenario() -> None:
        ns, topic = cluster.namesrv_addr, "RebalanceOrderTopic"
        await create_topic(ns, topic, 4)
        rec = Recorder()
        await join_and_leave(ns, topic, "g-rebalance-orderly", rec, orderly=True)
        for mq, deliveries in rec.by_queue().items():
            runs = owner_runs(deliveries)
            for (who1, run1), (who2, run2) in zip(runs, runs[1:]):
                assert max(d.end_s for d in run1) <= min(d.start_s for d in run2), \
                    f"{mq}: {who1} and {who2} consumed it at the same time"
                assert run2[0].offset <= run1[-1].offset + 1, f"{mq}: offsets skipped when it moved to {who2}"
            for who, one in runs:
                offsets = [d.offset for d in one]
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), \
                    f"{mq}: {who} consumed out of order or with a gap"
        first_seen: dict[str, list[int]] = defaultdict(list)
        seen: set[str] = set()
        for d in sorted(rec.snapshot(), key=lambda d: (d.start_s, d.offset)):
            if d.body not in seen:
                seen.add(d.body)
                key, _, n = d.body.partition(":")
                first_seen[key].append(int(n))
        for key, numbers in first_seen.items():
            assert numbers == sorted(numbers), f"{key} arrived out of order"

    run(scenario())
