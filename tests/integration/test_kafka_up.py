"""`skiff up` starts a Kafka listener for every broker it runs: `--brokers 2` gives each broker
its own Kafka port (printed, 10 apart) and the Metadata of either lists both, so a client
bootstrapped at one broker produces to and consumes from both; `--tls` serves Kafka over TLS
with the try-out's self-signed certificate (docs/kafka.md, "skiff up")."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from skiff.client import Admin
from skiff.testing.processes import free_port, start_skiff
from skiff.testing.up_ha import free_ports_apart
from skiff.testing.waits import wait_for

COUNT = 40


def produce(config: dict[str, Any], topic: str, partitions: int, tag: str) -> None:
    """``COUNT`` records spread over every partition, each acknowledged (acks=all)."""
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    for i in range(COUNT):
        producer.produce(topic, f"{tag}-{i}".encode(), key=f"k{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def consume(config: dict[str, Any], topic: str, partitions: int, count: int) -> dict[int, list[str]]:
    """Every partition read from its start until ``count`` records arrived: values by partition."""
    consumer = Consumer({**config, "group.id": f"up-readers-{time.monotonic_ns()}", "fetch.wait.max.ms": 100,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[str]] = {}
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.setdefault(msg.partition(), []).append(msg.value().decode())
                got += 1
    finally:
        consumer.close()
    return out


def brokers_listed(config: dict[str, Any], expected: list[str]) -> bool:
    probe = Consumer({**config, "group.id": "up-probe"})
    try:
        meta = probe.list_topics(timeout=5)
        return sorted(f"{b.host}:{b.port}" for b in meta.brokers.values()) == sorted(expected)
    finally:
        probe.close()


def test_each_broker_of_up_brokers_serves_kafka(tmp_path: Path) -> None:
    base = free_ports_apart((0, 1, 10, 11))
    kafka = free_ports_apart((0, 10))
    proc = start_skiff(["up", "--brokers", "2", "--dir", str(tmp_path), "--namesrv-port", "0",
                        "--broker-port", str(base), "--grpc-port", "0", "--metrics-port", "0",
                        "--namesrv-metrics-port", "0", "--kafka-port", str(kafka), "--no-dashboard"], timeout_s=60)
    try:
        ns = proc.wait_for_line(r"skiff up --brokers 2: NameServer (\S+),", 30)[1]
        printed = dict(re.findall(r"(broker-[ab]): pid \d+, .*?Kafka clients at (\S+),", proc.output))
        listeners = [f"127.0.0.1:{kafka}", f"127.0.0.1:{kafka + 10}"]
        assert printed == {"broker-a": listeners[0], "broker-b": listeners[1]}
        topic = "UpBrokersKafka"
        with Admin(ns) as admin:
            assert len(admin.create_topic(topic, queue_nums=2)) == 2  # partitions 0-1 on broker-a, 2-3 on broker-b
        for at in listeners:
            wait_for(lambda: brokers_listed({"bootstrap.servers": at}, listeners), 30,
                     f"the Metadata of {at} listing both brokers")
        produce({"bootstrap.servers": listeners[0]}, topic, 4, "via-a")
        produce({"bootstrap.servers": listeners[1]}, topic, 4, "via-b")
        for at in listeners:
            read = consume({"bootstrap.servers": at}, topic, 4, 2 * COUNT)
            assert sorted(read) == [0, 1, 2, 3]
            for partition, values in read.items():
                for tag in ("via-a", "via-b"):  # every record of each producer, in order
                    assert [v for v in values if v.startswith(tag)] == [
                        f"{tag}-{i}" for i in range(COUNT) if i % 4 == partition]
    finally:
        assert proc.stop() == 0


def test_up_tls_serves_kafka_over_tls(tmp_path: Path) -> None:
    port = free_port()
    proc = start_skiff(["up", "--tls", "--dir", str(tmp_path / "data"), "--namesrv-port", "0", "--broker-port", "0",
                        "--metrics-port", "0", "--namesrv-metrics-port", "0", "--no-dashboard", "--grpcServerPort=0",
                        "--kafka-port", str(port)], timeout_s=60)
    try:
        proc.wait_for_line(rf"skiff broker listening on .*Kafka clients at 127\.0\.0\.1:{port}$", 30)
        cert = tmp_path / "data" / "tls" / "skiff.crt"
        config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(cert)}  # the host name (127.0.0.1) checked against the certificate
        produce(config, "UpTlsKafka", 1, "tls")
        assert consume(config, "UpTlsKafka", 1, COUNT) == {0: [f"tls-{i}" for i in range(COUNT)]}
        reports: list[Any] = []
        plain = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "message.timeout.ms": 1500})
        plain.produce("UpTlsKafka", b"in the clear", on_delivery=lambda err, msg: reports.append(err))
        assert plain.flush(15) == 0 and len(reports) == 1
        assert reports[0] is not None, "a plaintext client was served"
    finally:
        assert proc.stop() == 0
