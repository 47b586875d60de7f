"""A broker group with a slave: the slave's Kafka listener names the master as the leader
of every partition (one node id for the group, at the master's host), so a Kafka client
that knows only the slave produces to and consumes from the master."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from skiff.testing.ha import HAGroup
from skiff.testing.processes import free_port
from skiff.testing.waits import wait_for

SLAVE_HOST = "127.0.0.2"  # the same Kafka port on another loopback address: the cluster's one Kafka port


def test_a_client_of_the_slave_is_sent_to_the_master(tmp_path: Path) -> None:
    port = free_port()
    with HAGroup(tmp_path, slaves=1, hosts={1: SLAVE_HOST},
                 broker_args=[f"--kafkaListenPort={port}", "--defaultTopicQueueNums=2"],
                 slave_args=["--slaveSyncInterval=500"]):  # the slave learns the topic soon
        master_kafka, slave_kafka = f"127.0.0.1:{port}", f"{SLAVE_HOST}:{port}"
        seed = Producer({"bootstrap.servers": master_kafka})
        seed.produce("ha-topic", b"made on the master", partition=0)
        assert seed.flush(30) == 0

        def slave_names_master() -> bool:
            probe = Consumer({"bootstrap.servers": slave_kafka, "group.id": "probe"})
            try:
                meta = probe.list_topics("ha-topic", timeout=5)
                topic = meta.topics["ha-topic"]
                leaders = {p.leader for p in topic.partitions.values()}
                return topic.error is None and [f"{b.host}:{b.port}" for b in meta.brokers.values()] == [master_kafka] \
                    and leaders == set(meta.brokers)
            finally:
                probe.close()

        wait_for(slave_names_master, 60, "the slave's Metadata naming the master as leader")
        producer = Producer({"bootstrap.servers": slave_kafka, "acks": "all", "enable.idempotence": True})
        for i in range(10):
            producer.produce("ha-topic", f"via the slave's metadata {i}".encode(), key=str(i).encode(), partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": slave_kafka, "group.id": "ha-readers", "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition("ha-topic", p, 0) for p in range(2)])
        values = []
        deadline = time.monotonic() + 30
        try:
            while len(values) < 11 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    values.append(msg.value().decode())
        finally:
            consumer.close()
    assert sorted(values) == sorted(["made on the master", *(f"via the slave's metadata {i}" for i in range(10))])
