"""spark.read.format("skiff"): exactly the messages of a range, with every column right."""

from __future__ import annotations

import json
import time

import pytest

from skiff.client import Message, MessageQueue
from skiff.testing.waits import wait_for
from tests.integration.spark.kit import create_topic, pull_all, reader, send, spark_quiet

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sent(cluster):
    """60 messages over a topic of 3 queues on each of the 2 brokers, in two waves a clock tick apart."""
    ns = cluster.namesrv_addr
    topic = create_topic(ns, "batch", queues=3)
    messages = [Message.of(topic, f"body-{i}".encode() + bytes([i]), tags="A" if i % 2 else "B",
                           keys=f"order-{i} customer-{i % 7}", properties={"n": str(i), "shard": f"s{i % 3}"})
                for i in range(60)]
    first = send(ns, messages[:40])
    boundary_ms = int(time.time() * 1000) + 1
    wait_for(lambda: time.time() * 1000 > boundary_ms + 1, what="the clock passing the boundary")
    return topic, messages, first + send(ns, messages[40:]), boundary_ms


def ms(timestamp) -> int:
    """A naive local datetime from Spark as ms since the epoch."""
    return round(timestamp.timestamp() * 1000)


def test_reads_every_message_with_its_columns(spark, cluster, sent):
    topic, messages, results, _ = sent
    stored = {m.msg_id: m for _, m in pull_all(cluster.namesrv_addr, topic)}
    rows = reader(spark, cluster.namesrv_addr, topic).collect()
    assert sorted(r.msg_id for r in rows) == sorted(r.msg_id for r in results)
    by_id = {r.msg_id: r for r in rows}
    brokers = set()
    for msg, result in zip(messages, results):
        row = by_id[result.msg_id]
        brokers.add(row.broker)
        assert (row.topic, row.broker, row.queue_id, row.queue_offset) == \
            (topic, result.message_queue.broker_name, result.message_queue.queue_id, result.queue_offset)
        assert (bytes(row.body), row.tags, row.keys, row.properties) == \
            (msg.body, msg.tags, msg.properties["KEYS"], {"n": msg.properties["n"], "shard": msg.properties["shard"]})
        assert (ms(row.born_timestamp), ms(row.store_timestamp), row.reconsume_times) == \
            (stored[row.msg_id].born_timestamp, stored[row.msg_id].store_timestamp, 0)
    assert brokers == {"broker-a", "broker-b"}


def test_a_json_range_reads_exactly_that_range(spark, cluster, sent):
    topic, _, results, _ = sent
    start = {topic: {"broker-a": {"0": 2, "1": -1}}}  # others: earliest
    end = {topic: {"broker-a": {"0": 5}, "broker-b": {"2": 1, "0": -1}}}  # others: latest
    rows = reader(spark, cluster.namesrv_addr, topic, startingOffsets=json.dumps(start),
                  endingOffsets=json.dumps(end)).collect()

    def wanted(mq: MessageQueue, offset: int) -> bool:
        lo = {("broker-a", 0): 2, ("broker-a", 1): 10**9}.get((mq.broker_name, mq.queue_id), 0)
        hi = {("broker-a", 0): 5, ("broker-b", 2): 1}.get((mq.broker_name, mq.queue_id), 10**9)
        return lo <= offset < hi

    expected = sorted(r.msg_id for r in results if wanted(r.message_queue, r.queue_offset))
    assert sorted(r.msg_id for r in rows) == expected
    assert 0 < len(expected) < len(results)


def test_timestamps_tags_and_min_partitions(spark, cluster, sent):
    topic, messages, results, boundary_ms = sent
    ns = cluster.namesrv_addr
    late = reader(spark, ns, topic, startingTimestamp=str(boundary_ms)).collect()
    assert sorted(r.msg_id for r in late) == sorted(r.msg_id for r in results[40:])
    early = reader(spark, ns, topic, endingTimestamp=str(boundary_ms)).collect()
    assert sorted(r.msg_id for r in early) == sorted(r.msg_id for r in results[:40])
    tagged = reader(spark, ns, topic, subExpression="A").collect()
    assert sorted(r.msg_id for r in tagged) == sorted(r.msg_id for m, r in zip(messages, results) if m.tags == "A")
    selected = reader(spark, ns, topic, expressionType="SQL92", subExpression="shard = 's1' AND n > 20").collect()
    assert sorted(r.msg_id for r in selected) == sorted(
        r.msg_id for m, r in zip(messages, results) if m.properties["shard"] == "s1" and int(m.properties["n"]) > 20)
    split = reader(spark, ns, topic, minPartitions="12", includeProperties="false")
    assert split.rdd.getNumPartitions() >= 12
    rows = split.collect()
    assert sorted(r.msg_id for r in rows) == sorted(r.msg_id for r in results)
    assert all(r.properties is None for r in rows)


@pytest.mark.parametrize("options, words", [
    ({"topic": "x"}, "option namesrvAddr is required"),
    ({"namesrvAddr": "@", "topic": "no-such-topic"}, "topic 'no-such-topic' does not exist"),
    ({"namesrvAddr": "@", "topic": "@", "startingOffsets": '{"T": [1]}'}, "must map broker names"),
    ({"namesrvAddr": "@", "topic": "@", "startingOffsets": "{oops"}, "is neither earliest, latest nor JSON"),
])
def test_bad_input_fails_with_a_clear_error(spark, cluster, sent, options, words):
    # "@" stands for the cluster's NameServer (namesrvAddr) or the module's topic (topic)
    real = {"namesrvAddr": cluster.namesrv_addr, "topic": sent[0]}
    options = {k: real[k] if v == "@" else v for k, v in options.items()}
    with spark_quiet(spark), pytest.raises(Exception) as err:
        spark.read.format("skiff").options(**options).load().collect()
    assert words in str(err.value)


def test_a_time_range_splits_into_even_partitions(spark, cluster, sent):
    topic, _, results, boundary_ms = sent
    late = reader(spark, cluster.namesrv_addr, topic, startingTimestamp=str(boundary_ms),
                  endingTimestamp=str(int(time.time() * 1000) + 60_000), maxRecordsPerPartition="3")
    sizes = late.rdd.glom().map(len).collect()
    assert sum(sizes) == len(results[40:]) and max(sizes) <= 3
    assert sorted(r.msg_id for r in late.collect()) == sorted(r.msg_id for r in results[40:])
