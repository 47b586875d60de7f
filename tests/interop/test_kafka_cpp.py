"""Kafka clients and the RocketMQ C++ client (PyPI `rocketmq` 0.4.4, its own venv) on one
topic of a real Skiff cluster: what the C++ producer sends a Kafka consumer reads (body,
KEYS as the key, tag and properties as headers), and what a Kafka producer sends the C++
push consumer reads (the key as KEYS, headers as properties, a TAGS header as the tag it
filters on)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from skiff.testing.cluster import Cluster
from tests.integration.kafka_kit import kafka_cluster
from tests.interop._cpp import SCRIPTS, cpp_python, produce

pytestmark = pytest.mark.interop

PARTITIONS = 4
WAIT_S = 60


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    cpp_python()  # skip early when the client is missing
    with kafka_cluster(tmp_path_factory.mktemp("kafka-cpp"), f"--defaultTopicQueueNums={PARTITIONS}") as c:
        yield c


def make_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the futures resolve
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], operation_timeout=10).values():
        future.result(timeout=30)


def test_cpp_producer_to_kafka_consumer(kafka: tuple[Cluster, str], tmp_path: Path) -> None:
    cluster, bootstrap = kafka
    topic = "kafka-cpp-from-cpp"
    make_topic(bootstrap, topic)
    sent = [{"body": f"from C++ {i}", "tags": f"Tag{i % 2}", "keys": f"key-{i}", "props": {"region": f"r{i}"}}
            for i in range(12)]
    results = produce(tmp_path / "home", cluster.namesrv_addr, topic, sent)
    assert [r["status"] for r in results] == ["OK"] * len(sent)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-reads-cpp", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = {}
    deadline = time.monotonic() + WAIT_S
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                headers = dict(msg.headers() or [])
                got[msg.value().decode()] = (msg.key(), headers.get("TAGS"), headers.get("region"))
    finally:
        consumer.close()
    assert got == {s["body"]: (s["keys"].encode(), s["tags"].encode(), s["props"]["region"].encode()) for s in sent}


def test_kafka_producer_to_cpp_push_consumer(kafka: tuple[Cluster, str], tmp_path: Path) -> None:
    cluster, bootstrap = kafka
    topic = "kafka-cpp-to-cpp"
    make_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    wanted = {}
    for i in range(12):
        tag = "TagA" if i % 3 else "TagC"
        body = f"from Kafka {i} ✓"
        producer.produce(topic, body.encode(), key=f"kkey-{i}".encode(), partition=i % PARTITIONS,
                         headers=[("TAGS", tag), ("region", f"eu-{i}")])
        if tag == "TagA":
            wanted[body] = (f"kkey-{i}", f"eu-{i}")
    assert producer.flush(30) == 0
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run([cpp_python(), str(SCRIPTS / "ours_to_cpp_consumer.py"), cluster.namesrv_addr, topic,
                           "CG-kafka-cpp", "TagA", str(len(wanted)), str(WAIT_S)],
                          capture_output=True, text=True, timeout=WAIT_S + 30, cwd=tmp_path, env={"HOME": str(home)})
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert lines[0] == "READY"
    got = [json.loads(line) for line in lines[1:]]
    assert len(got) == len(wanted)
    assert {g["body"]: (g["keys"], g["region"]) for g in got} == wanted
    assert {g["tags"] for g in got} == {"TagA"}
