"""One store, two protocols: a Kafka producer's messages read by Skiff's RocketMQ push
consumer, and a RocketMQ producer's read by a Kafka consumer; bodies, keys, headers and
properties intact, in order per queue. The Kafka examples run as a user would run them."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer as KafkaProducer, TopicPartition

from skiff.client import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from skiff.testing.cluster import Cluster
from tests.integration.kafka_kit import kafka_cluster

QUEUES = 4
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-cross"), f"--defaultTopicQueueNums={QUEUES}") as c:
        yield c


def test_kafka_producer_to_rocketmq_consumer(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    topic = "xp-kafka-to-rmq"
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    sent = {}
    for i in range(24):
        key = f"order-{i}"
        headers = [("region", f"r{i % 3}"), ("trace", bytes([0, i, 255]))]
        producer.produce(topic, value=f"payload {i}".encode(), key=key.encode(), partition=i % QUEUES,
                         headers=headers)
        sent[f"payload {i}"] = (key, f"r{i % 3}", i % QUEUES)
    assert producer.flush(30) == 0

    received: list = []
    done = threading.Event()
    lock = threading.Lock()

    def on_messages(msgs, ctx):
        with lock:
            received.extend(msgs)
            if len(received) >= len(sent):
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("xp-rmq-group", cluster.namesrv_addr,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    consumer.register_listener(on_messages)
    with consumer:
        assert done.wait(40), f"{len(received)} of {len(sent)} messages arrived"
    assert sorted(m.body.decode() for m in received) == sorted(sent)
    for m in received:
        key, region, queue = sent[m.body.decode()]
        assert m.keys == [key] and m.queue_id == queue
        assert m.properties["region"] == region  # a text header is a user property
        i = int(m.body.decode().split()[1])
        assert base64.b64decode(m.properties["KAFKA_HB64.trace"]) == bytes([0, i, 255])  # binary kept, base64
    by_queue: dict[int, list[int]] = {}
    for m in sorted(received, key=lambda m: (m.queue_id, m.queue_offset)):
        by_queue.setdefault(m.queue_id, []).append(int(m.body.decode().split()[1]))
    assert all(seq == sorted(seq) for seq in by_queue.values())  # offsets follow the Kafka send order


def test_rocketmq_producer_to_kafka_consumer(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    topic = "xp-rmq-to-kafka"
    with Producer("xp-producer", cluster.namesrv_addr) as producer:
        results = [producer.send(Message.of(topic, f"rmq {i}", tags="TagX", keys=[f"k-{i}"],
                                            properties={"color": "blue", "n": str(i)})) for i in range(20)]
    expected = {r.message_queue.queue_id: [] for r in results}
    for i, r in enumerate(results):
        expected[r.message_queue.queue_id].append((r.queue_offset, f"rmq {i}"))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "xp-kafka-group", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, q, 0) for q in range(QUEUES)])
    got: dict[int, list] = {}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, got.values())) < len(results) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append(msg)
    finally:
        consumer.close()
    assert {q: [(m.offset(), m.value().decode()) for m in ms] for q, ms in got.items()} == expected
    for ms in got.values():
        for m in ms:
            i = m.value().decode().split()[1]
            headers = dict(m.headers())
            assert m.key() == f"k-{i}".encode()
            assert headers == {"TAGS": b"TagX", "color": b"blue", "n": i.encode()}
            assert m.timestamp()[1] > 0  # the born time as the record's CreateTime


@pytest.mark.parametrize("example", ["kafka_produce_consume.py", "kafka_to_rocketmq.py"])
def test_kafka_examples_run(kafka: tuple[Cluster, str], example: str) -> None:
    cluster, bootstrap = kafka
    done = subprocess.run([sys.executable, str(EXAMPLES / example), "--bootstrap", bootstrap,
                           "--namesrv", cluster.namesrv_addr, "--topic", f"ex-{example[:-3]}"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 10 arrived" in done.stdout, done.stdout
