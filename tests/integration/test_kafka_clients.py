"""Kafka's three Python clients against a real broker's Kafka listener, one cluster for all.

- produce and consume: confluent-kafka (librdkafka) with acks=all and idempotence, in
  batches of each codec (gzip, snappy, lz4, zstd), seeking by timestamp; kafka-python with
  its default idempotence; aiokafka asynchronously. Every message, key and header arrives,
  in order per partition.
- a confluent-kafka consumer group of two: the partitions split, a rebalance when one
  leaves, commits that `skiff consumer progress` shows, a later member resuming from them.
- kafka-python's admin client: topics made, configured, grown, deleted; groups listed and
  described.
- one store, two protocols: a Kafka producer's messages read by Skiff's RocketMQ push
  consumer, a RocketMQ producer's read by a Kafka consumer; the Kafka examples run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError

from skiff.client import ConsumeFromWhere, ConsumeStatus, Message, PushConsumer
from skiff.client import Producer as RocketProducer
from skiff.protocol.bodies.admin import SubscriptionGroupWrapper
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode
from skiff.testing.cluster import Cluster
from skiff.testing.processes import skiff_command
from skiff.testing.waits import wait_for
from skiff.testing.wire import BrokerWire, with_wire
from tests.integration.kafka_kit import kafka_cluster

PARTITIONS = 4  # topics made through Metadata get defaultTopicQueueNums queues
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GROUP_TOPIC = "kgroup-topic"
GROUP = "kgroup"
DEADLINE_S = 40.0

pytestmark = pytest.mark.xdist_group("kafka-clients")  # one worker, one cluster: the fixture is set up once


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka"), f"--defaultTopicQueueNums={PARTITIONS}") as c:
        yield c


# -- produce and consume --------------------------------------------------------------

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


# -- a consumer group -------------------------------------------------------------------

def produce_to_group_topic(bootstrap: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        producer.produce(GROUP_TOPIC, value=v.encode(), key=str(i).encode(), partition=i % PARTITIONS)
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
    produce_to_group_topic(bootstrap, first)
    a, b = member(bootstrap), member(bootstrap)
    a.subscribe([GROUP_TOPIC])
    b.subscribe([GROUP_TOPIC])
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
        produce_to_group_topic(bootstrap, second)
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
    groups: list[SubscriptionGroupWrapper] = []

    async def read_groups(wire: BrokerWire) -> None:
        answer = await wire.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups.append(SubscriptionGroupWrapper.from_json(answer.body))
    with_wire(cluster.broker_addr(0), read_groups)
    assert GROUP in groups[0].subscription_group_table  # listed with RocketMQ's groups (skiff consumer, dashboard)

    third = [f"third-{i}" for i in range(8)]
    produce_to_group_topic(bootstrap, third)
    c = member(bootstrap)
    c.subscribe([GROUP_TOPIC])
    later: dict[str, list[str]] = {}
    try:
        poll_until({"c": c}, lambda: len(later.get("c", [])) >= len(third), later)
        extra = c.poll(1.0)  # nothing before the committed offsets comes again
        assert extra is None or extra.error() is not None
    finally:
        c.close()
    assert sorted(later["c"]) == sorted(third)


# -- admin ------------------------------------------------------------------------------

def topic_attributes(cluster: Cluster, topic: str) -> tuple[int, dict[str, str]]:
    """The queue count and attributes the broker holds for ``topic`` (read over remoting)."""
    found: list[TopicConfig] = []

    async def read(wire: BrokerWire) -> None:
        answer = await wire.call(RequestCode.GET_ALL_TOPIC_CONFIG)
        found.append(TopicConfigSerializeWrapper.from_json(answer.body).topic_config_table[topic])
    with_wire(cluster.broker_addr(0), read)
    return found[0].read_queue_nums, dict(found[0].attributes)


def test_topics_and_configs(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kadmin-plain", 2, 1),
                             NewTopic("kadmin-compact", 3, 1, topic_configs={"cleanup.policy": "compact"})])
        assert topic_attributes(cluster, "kadmin-compact") == (3, {"cleanup.policy": "COMPACTION"})
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kadmin-plain", 2, 1)])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("kadmin-bad", 1, 1, topic_configs={"segment.bytes": "1"})])
        assert "kadmin-bad" not in admin.list_topics()

        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-compact")],
                                           config_filter="all")
        [(_, topics)] = described.items()
        configs = {name: c["value"] if isinstance(c, dict) else c for name, c in topics["kadmin-compact"].items()}
        assert configs["cleanup.policy"] == "compact" and configs["retention.ms"] == str(72 * 3_600_000)

        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-plain",
                                            configs={"cleanup.policy": "compact", "delete.retention.ms": "1000"})])
        assert topic_attributes(cluster, "kadmin-plain")[1] == {"cleanup.policy": "COMPACTION",
                                                               "delete.retention.ms": "1000"}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kadmin-plain",
                                            configs={"cleanup.policy": "delete"})])
        # kafka-python sends the topic's other configs with the one changed (so the rest stays)
        assert topic_attributes(cluster, "kadmin-plain")[1] == {"cleanup.policy": "DELETE",
                                                               "delete.retention.ms": "1000"}

        admin.create_partitions({"kadmin-plain": NewPartitions(5)})
        assert topic_attributes(cluster, "kadmin-plain")[0] == 5
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("kadmin-plain", b"to the new partition", partition=4).get(timeout=10)
        producer.close()

        admin.delete_topics(["kadmin-plain", "kadmin-compact"])
        remaining = wait_for(lambda: (lambda t: t if "kadmin-plain" not in t else None)(set(admin.list_topics())),
                             10, "the deleted topics gone from Metadata")
        assert "kadmin-compact" not in remaining
    finally:
        admin.close()


def test_groups_listed_and_described(kafka: tuple[Cluster, str]) -> None:
    _, bootstrap = kafka
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send("kadmin-groups", b"one", partition=0).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("kadmin-groups", bootstrap_servers=bootstrap, group_id="kadmin-group",
                             auto_offset_reset="earliest", client_id="described-member")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 30
        values = []
        while not values and time.monotonic() < deadline:
            values = [r.value for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        assert values == [b"one"]
        listed = admin.list_groups()
        assert any(g["group_id"] == "kadmin-group" and g["protocol_type"] == "consumer" for g in listed), listed
        group = admin.describe_groups(["kadmin-group"])["kadmin-group"]
        assert group["error"] is None and group["group_state"] == "Stable" and group["protocol_type"] == "consumer"
        [described] = group["members"]
        assert described["client_id"] == "described-member"
        assert described["member_metadata"]["topics"] == ["kadmin-groups"]  # the subscription the member sent
    finally:
        consumer.close()
        admin.close()


# -- one store, two protocols -----------------------------------------------------------

def test_kafka_producer_to_rocketmq_consumer(kafka: tuple[Cluster, str]) -> None:
    cluster, bootstrap = kafka
    topic = "xp-kafka-to-rmq"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    sent = {}
    for i in range(24):
        key = f"order-{i}"
        headers = [("region", f"r{i % 3}"), ("trace", bytes([0, i, 255]))]
        producer.produce(topic, value=f"payload {i}".encode(), key=key.encode(), partition=i % PARTITIONS,
                         headers=headers)
        sent[f"payload {i}"] = (key, f"r{i % 3}", i % PARTITIONS)
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
    with RocketProducer("xp-producer", cluster.namesrv_addr) as producer:
        results = [producer.send(Message.of(topic, f"rmq {i}", tags="TagX", keys=[f"k-{i}"],
                                            properties={"color": "blue", "n": str(i)})) for i in range(20)]
    expected = {r.message_queue.queue_id: [] for r in results}
    for i, r in enumerate(results):
        expected[r.message_queue.queue_id].append((r.queue_offset, f"rmq {i}"))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "xp-kafka-group", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
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


# -- a compacted topic ------------------------------------------------------------------

def test_compacted_topic_reads_with_gaps(kafka: tuple[Cluster, str]) -> None:
    """A topic created with cleanup.policy=compact: after Skiff compacts it, a Kafka consumer
    reads the latest record of every key (a binary key too) at its original offset, over
    the gaps the superseded records left, up to the end."""
    cluster, bootstrap = kafka
    topic = "kcompact"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        admin.close()
    keys = [b"alpha", b"beta", b"gamma", bytes([0xFF, 0x00, 0x01])]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(24):
        producer.produce(topic, f"v{i}".encode(), key=keys[i % len(keys)], partition=0)
    assert producer.flush(30) == 0
    done = subprocess.run(skiff_command(["topic", "compact", "-t", topic, "-n", cluster.namesrv_addr]),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-reader", "fetch.wait.max.ms": 100,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read: list[tuple[int, bytes, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == -191  # _PARTITION_EOF: the consumer reached the end
                break
            read.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    latest = {keys[i % len(keys)]: (i, f"v{i}".encode()) for i in range(24)}
    assert sorted((o, k, v) for k, (o, v) in latest.items()) == [r for r in read if r[0] >= 20]
    assert len(read) < 24 and [o for o, _, _ in read] == sorted({o for o, _, _ in read})  # gaps, in order
    for offset, key, value in read:  # whatever compaction kept is what was sent at that offset
        assert (key, value) == (keys[offset % len(keys)], f"v{offset}".encode())
