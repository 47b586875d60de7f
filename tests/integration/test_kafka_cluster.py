"""Two broker groups as one Kafka cluster: a Kafka client that knows one broker learns every
group's master from its Metadata, spreads a topic held by both groups over both brokers,
and reads it all back through a consumer group whose offsets land on the broker holding
each partition; a broker asked for a partition another group leads answers
NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from skiff.broker.kafka.cluster import node_id
from skiff.client import Admin
from skiff.common.message import MessageQueue
from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.testing.cluster import Cluster
from skiff.testing.waits import wait_for
from tests.integration.kafka_kit import kafka_groups
from tests.integration.test_kafka_wire import Wire, batch, fetch_body, produce_body

pytestmark = pytest.mark.xdist_group("kafka-cluster")  # one worker, one cluster: the fixture is set up once

TOPIC = "spread"
QUEUES = 2  # per broker group
PER_PARTITION = 30


@pytest.fixture(scope="module")
def groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, list[str]]]:
    with kafka_groups(tmp_path_factory.mktemp("kafka-cluster"), 2, f"--defaultTopicQueueNums={QUEUES}") as c:
        cluster, _ = c
        with _admin(cluster) as admin:
            assert len(admin.create_topic(TOPIC, queue_nums=QUEUES)) == 2  # one master per broker group
        yield c


@contextmanager
def _admin(cluster: Cluster) -> Iterator[Admin]:
    admin = Admin(cluster.namesrv_addr)
    admin.start()
    try:
        yield admin
    finally:
        admin.shutdown()


def _leaders(bootstrap: str) -> dict[int, tuple[int, str]]:
    """partition → (leader node id, its host:port) as a client bootstrapped at ``bootstrap`` sees them."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    brokers = {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}
    parts = meta.topics[TOPIC].partitions
    return {p: (parts[p].leader, brokers.get(parts[p].leader, "?")) for p in parts}


def test_metadata_names_every_group_master(groups: tuple[Cluster, list[str]]) -> None:
    cluster, (a, b) = groups
    expected = {0: (node_id("broker-a"), a), 1: (node_id("broker-a"), a),
                2: (node_id("broker-b"), b), 3: (node_id("broker-b"), b)}
    for bootstrap in (a, b):  # the same answer from either broker: partitions numbered by broker name
        wait_for(lambda: _leaders(bootstrap) == expected, 30, f"{bootstrap}'s Metadata to name both masters")


def test_produce_spreads_and_a_group_reads_each_message_once(groups: tuple[Cluster, list[str]]) -> None:
    cluster, (a, b) = groups
    partitions = 2 * QUEUES
    wait_for(lambda: len(_leaders(a)) == partitions and -1 not in {lead for lead, _ in _leaders(a).values()}, 30,
             "Metadata with every partition led")
    producer = Producer({"bootstrap.servers": a, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    failed: list[str] = []
    sent = {p: [f"p{p}-{i:03d}".encode() for i in range(PER_PARTITION)] for p in range(partitions)}
    for p, values in sent.items():
        for value in values:
            producer.produce(TOPIC, value, partition=p,
                             on_delivery=lambda err, msg: failed.append(str(err)) if err is not None else None)
    assert producer.flush(60) == 0 and not failed, failed

    queues = [MessageQueue(TOPIC, name, q) for name in ("broker-a", "broker-b") for q in range(QUEUES)]
    with _admin(cluster) as admin:  # each broker group stored its own partitions' messages, in its own queues
        assert {mq: admin.max_offset(mq) for mq in queues} == {mq: PER_PARTITION for mq in queues}

    consumer = Consumer({"bootstrap.servers": b, "group.id": "spread-readers", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < partitions * PER_PARTITION and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    got[msg.partition()].append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    assert got == sent  # every message once, in the order sent per partition
    assert {tp.partition: tp.offset for tp in committed} == {p: PER_PARTITION for p in range(partitions)}

    with _admin(cluster) as admin:  # the group's offsets are kept by the broker group holding each queue
        assert {mq: admin.fetch_consumer_offset("spread-readers", mq) for mq in queues} == \
            {mq: PER_PARTITION for mq in queues}


def test_another_groups_partition_is_not_led_here(groups: tuple[Cluster, list[str]]) -> None:
    cluster, (a, b) = groups
    wire = Wire(a)
    try:
        body = produce_body(TOPIC, batch(b"misdirected"))
        body["topic_data"][0]["partition_data"][0]["index"] = QUEUES  # broker-b's queue 0
        part = wire.call(ApiKey.PRODUCE, 8, body)["responses"][0]["partition_responses"][0]
        assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetch = fetch_body(TOPIC, 0, 100)
        fetch["topics"][0]["partitions"][0]["partition"] = QUEUES
        answer = wire.call(ApiKey.FETCH, 11, fetch)["responses"][0]["partitions"][0]
        assert answer["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        fetch["topics"][0]["partitions"][0]["partition"] = 2 * QUEUES  # past the last partition
        answer = wire.call(ApiKey.FETCH, 11, fetch)["responses"][0]["partitions"][0]
        assert answer["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        wire.close()
