"""A Kafka consumer group served by Skiff's coordinator, with confluent-kafka: two members
split the partitions, one leaves and the other takes them all (a rebalance), offsets
committed go where RocketMQ groups' go (`skiff consumer progress` shows them), and a
consumer started later in the group resumes from them. Every message is read once."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from skiff.testing.cluster import Cluster
from skiff.testing.processes import skiff_command
from tests.integration.kafka_kit import kafka_cluster

PARTITIONS = 4
TOPIC = "kgroup-topic"
GROUP = "kgroup"
DEADLINE_S = 40.0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-groups"), f"--defaultTopicQueueNums={PARTITIONS}") as c:
        yield c


def produce(bootstrap: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        producer.produce(TOPIC, value=v.encode(), key=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def member(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                     "fetch.wait.max.ms": 100, "partition.assignment.strategy": "range"})


def poll_until(consumers: dict[str, Consumer], done, got: dict[str, list[str]]) -> None:
    """Poll every consumer in turn (committing what each read) until ``done()``."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"not done within {DEADLINE_S} s; read so far: {got}"
        for name, c in consumers.items():
            msg = c.poll(0.05)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(name, []).append(msg.value().decode())
            c.commit(message=msg, asynchronous=False)


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_group_of_two_rebalances_commits_and_resumes(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    first = [f"first-{i}" for i in range(40)]
    produce(bootstrap, first)
    a, b = member(bootstrap), member(bootstrap)
    a.subscribe([TOPIC])
    b.subscribe([TOPIC])
    got: dict[str, list[str]] = {}
    try:
        poll_until({"a": a, "b": b}, lambda: assigned(a) and assigned(b), got)
        assert assigned(a) | assigned(b) == set(range(PARTITIONS)) and not assigned(a) & assigned(b)
        poll_until({"a": a, "b": b}, lambda: sum(map(len, got.values())) >= len(first), got)
        assert sorted(got["a"] + got["b"]) == sorted(first)  # each message once, split between the two
        for name in "ab":
            by_partition: dict[int, list[int]] = {}
            for v in got[name]:
                i = int(v.split("-")[1])
                by_partition.setdefault(i % PARTITIONS, []).append(i)
            assert all(seq == sorted(seq) for seq in by_partition.values())  # in order per partition
        b.close()  # LeaveGroup: a rebalance gives every partition to a
        poll_until({"a": a}, lambda: assigned(a) == set(range(PARTITIONS)), got)
        second = [f"second-{i}" for i in range(20)]
        produce(bootstrap, second)
        poll_until({"a": a}, lambda: len([v for v in got["a"] if v.startswith("second")]) >= len(second), got)
        assert sorted(v for v in got["a"] if v.startswith("second")) == sorted(second)
    finally:
        a.close()
    progress = subprocess.run(skiff_command(["consumer", "progress", "-g", GROUP, "--json", "-n",
                                             cluster.namesrv_addr]), capture_output=True, text=True, timeout=60)
    assert progress.returncode == 0, progress.stderr
    queues = json.loads(progress.stdout)["queues"]
    assert sorted(q["mq"]["queue_id"] for q in queues) == list(range(PARTITIONS))
    assert all(q["consumer_offset"] == q["broker_offset"] == 15 for q in queues)  # 60 messages, 4 partitions

    third = [f"third-{i}" for i in range(8)]
    produce(bootstrap, third)
    c = member(bootstrap)
    c.subscribe([TOPIC])
    later: dict[str, list[str]] = {}
    try:
        poll_until({"c": c}, lambda: len(later.get("c", [])) >= len(third), later)
        extra = c.poll(1.0)  # nothing before the committed offsets comes again
        assert extra is None or extra.error() is not None
    finally:
        c.close()
    assert sorted(later["c"]) == sorted(third)
