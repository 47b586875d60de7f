"""Latency fault avoidance: the duration table, availability and queue choice."""

from __future__ import annotations

import random

from skiff.client._impl.fault import FaultStrategy, LatencyFaultTolerance, not_available_duration_ms
from skiff.client._impl.route import TopicPublishInfo
from skiff.common.clock import ManualClock
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.route import TopicRouteData


def info(*brokers: str, per: int = 2) -> TopicPublishInfo:
    return TopicPublishInfo("T", tuple(MessageQueue("T", b, i) for b in brokers for i in range(per)), False,
                            TopicRouteData())


def test_durations_follow_rocketmqs_table():
    assert [not_available_duration_ms(ms) for ms in (0, 99, 100, 549, 550, 999, 1000, 2500, 3000, 14999, 15000, 30000)] \
        == [0, 0, 0, 0, 30_000, 30_000, 60_000, 120_000, 180_000, 180_000, 600_000, 600_000]


def test_a_broker_comes_back_when_its_time_is_up():
    clock = ManualClock()
    faults = LatencyFaultTolerance(clock)
    faults.update("a", 600, 30_000)
    assert not faults.is_available("a") and faults.is_available("b")
    clock.advance(29_999)
    assert not faults.is_available("a")
    clock.advance(1)
    assert faults.is_available("a")
    faults.update("b", 5000, 180_000)
    assert faults.least_bad() == "a"
    faults.remove("a")
    assert faults.least_bad() == "b"


def test_selection_skips_failed_and_slow_brokers():
    clock = ManualClock()
    strategy = FaultStrategy(True, clock, random.Random(1))
    topic = info("a", "b", "c")
    strategy.update("b", 10, failed=True)
    strategy.update("c", 700, failed=False)
    picks = {strategy.select(topic).broker_name for _ in range(20)}
    assert picks == {"a"}
    strategy.update("a", 10, failed=True)
    clock.advance(1000)
    # every broker avoided: the least bad (c, free again soonest) is used
    assert {strategy.select(topic).broker_name for _ in range(10)} == {"c"}
    clock.advance(30_000)
    assert {strategy.select(topic).broker_name for _ in range(20)} == {"c"}
    clock.advance(600_000)
    assert {strategy.select(topic).broker_name for _ in range(30)} == {"a", "b", "c"}


def test_fast_sends_keep_every_broker_and_retries_move_on():
    strategy = FaultStrategy(True, ManualClock(), random.Random(2))
    topic = info("a", "b")
    strategy.update("a", 20, failed=False)
    assert {strategy.select(topic).broker_name for _ in range(10)} == {"a", "b"}
    assert {strategy.select(topic, last_broker="a").broker_name for _ in range(10)} == {"b"}


def test_disabled_strategy_only_avoids_the_last_broker():
    strategy = FaultStrategy(False, ManualClock(), random.Random(3))
    topic = info("a", "b")
    strategy.update("a", 10, failed=True)
    assert {strategy.select(topic).broker_name for _ in range(10)} == {"a", "b"}
    assert {strategy.select(topic, last_broker="b").broker_name for _ in range(10)} == {"a"}
    assert strategy.select(info("a"), last_broker="a").broker_name == "a"
    queues = [strategy.select(topic) for _ in range(4)]
    assert len(set(queues)) == 4


def test_each_topic_has_its_own_round_robin():
    """Sending to topics in turn still reaches every queue of each (RocketMQ's per-topic
    sendWhichQueue); one shared counter gave each topic one residue class of its queues."""
    strategy = FaultStrategy(False, ManualClock(), random.Random(4))
    topics = [TopicPublishInfo(f"T{t}", tuple(MessageQueue(f"T{t}", "a", i) for i in range(8)), False,
                               TopicRouteData()) for t in range(4)]
    picked = {t.topic: set() for t in topics}
    for _ in range(8):
        for t in topics:
            picked[t.topic].add(strategy.select(t).queue_id)
    assert all(ids == set(range(8)) for ids in picked.values())
