"""Kafka's three Python clients against a real broker's Kafka listener: each produces
and consumes real data; every message, key and header arrives, in order per partition.

confluent-kafka (librdkafka) produces with acks=all and idempotence, in batches of each
codec (gzip, snappy, lz4, zstd), and seeks by timestamp; kafka-python produces with its
default idempotence; aiokafka produces and consumes asynchronously.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from skiff.testing.cluster import Cluster
from tests.integration.kafka_kit import kafka_cluster

PARTITIONS = 3  # topics made through Metadata get defaultTopicQueueNums queues


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka"), f"--defaultTopicQueueNums={PARTITIONS}") as c:
        yield c


def sent_messages(tag: str, n: int) -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]:
    """(partition, key, value, headers): keys and headers differ per message, a binary header too."""
    return [(i % PARTITIONS, f"{tag}-key-{i}".encode(), f"{tag} value {i} ".encode() * (1 + i % 7),
             [("seq", str(i).encode()), ("bin", bytes([i % 256, 0xFF, 0x00]))]) for i in range(n)]


def per_partition(msgs: list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for p, k, v, h in msgs:
        out.setdefault(p, []).append((k, v, h))
    return out


def confluent_consume(bootstrap: str, topic: str, expected: int, timeout_s: float = 30.0) -> dict[int, list[tuple]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"assign-{topic}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 200})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[tuple]] = {}
    deadline = time.monotonic() + timeout_s
    count = 0
    try:
        while count < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.setdefault(msg.partition(), []).append((msg.offset(), msg.key(), msg.value(), msg.headers() or []))
            count += 1
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_idempotent_produce_and_consume(kafka: tuple[Cluster, str], codec: str) -> None:
    _, bootstrap = kafka
    topic = f"cf-{codec}"
    msgs = sent_messages(topic, 60)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": codec, "linger.ms": 20})
    reports: list = []
    for p, k, v, h in msgs:
        producer.produce(topic, value=v, key=k, partition=p, headers=h,
                         on_delivery=lambda err, m: reports.append((err, m.partition(), m.offset())))
    assert producer.flush(30) == 0
    assert [r for r in reports if r[0] is not None] == []
    for p in range(PARTITIONS):  # acknowledged offsets are dense, in send order
        assert sorted(o for _, q, o in reports if q == p) == list(range(len(per_partition(msgs)[p])))
    got = confluent_consume(bootstrap, topic, len(msgs))
    want = per_partition(msgs)
    for p in range(PARTITIONS):
        assert [o for o, *_ in got[p]] == list(range(len(want[p])))
        assert [(k, v, h) for _, k, v, h in got[p]] == want[p]


def test_confluent_seek_by_timestamp_and_watermarks(kafka: tuple[Cluster, str]) -> None:
    _, bootstrap = kafka
    topic = "cf-times"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, value=f"early {i}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "times"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 5)
        split_ms = int(time.time() * 1000) + 1
        while int(time.time() * 1000) <= split_ms:  # the later messages are stored after split_ms
            time.sleep(0.002)
        for i in range(3):
            producer.produce(topic, value=f"late {i}".encode(), partition=0)
        assert producer.flush(30) == 0
        [found] = consumer.offsets_for_times([TopicPartition(topic, 0, split_ms)], timeout=10)
        assert found.error is None and found.offset == 5
        [past] = consumer.offsets_for_times([TopicPartition(topic, 0, split_ms + 3_600_000)], timeout=10)
        assert past.offset == -1  # no message at or after that time: Kafka's -1
        consumer.assign([TopicPartition(topic, 0, found.offset)])
        values = []
        deadline = time.monotonic() + 20
        while len(values) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        assert values == [b"late 0", b"late 1", b"late 2"]
    finally:
        consumer.close()


def test_kafka_python_produce_and_consume(kafka: tuple[Cluster, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    _, bootstrap = kafka
    topic = "kp-topic"
    msgs = sent_messages(topic, 40)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip", linger_ms=10)
    futures = [producer.send(topic, key=k, value=v, headers=h, partition=p) for p, k, v, h in msgs]
    producer.flush(30)
    offsets = [f.get(timeout=10) for f in futures]
    producer.close()
    assert all(m.topic == topic for m in offsets)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3000, fetch_max_wait_ms=200)
    consumer.assign([KTP(topic, p) for p in range(PARTITIONS)])
    got: dict[int, list[tuple]] = {}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < len(msgs) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            for r in records:
                got.setdefault(r.partition, []).append((r.key, r.value, [(n, v) for n, v in r.headers]))
    consumer.close()
    assert got == per_partition(msgs)


def test_aiokafka_produce_and_consume(kafka: tuple[Cluster, str]) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    _, bootstrap = kafka
    topic = "aio-topic"
    msgs = sent_messages(topic, 40)

    async def run() -> dict[int, list[tuple]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4", linger_ms=10)
        await producer.start()
        try:
            sent = [await producer.send(topic, key=k, value=v, headers=h, partition=p) for p, k, v, h in msgs]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False, fetch_max_wait_ms=200)
        await consumer.start()
        got: dict[int, list[tuple]] = {}
        try:
            consumer.assign([ATP(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 30
            while sum(map(len, got.values())) < len(msgs) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for r in records:
                        got.setdefault(r.partition, []).append((r.key, r.value, list(r.headers)))
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == per_partition(msgs)
