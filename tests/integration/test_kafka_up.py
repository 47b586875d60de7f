"""`skiff up` starts a Kafka listener for every broker it runs: `--brokers 2` gives each broker
its own Kafka port (printed, 10 apart) and the Metadata of either lists both, so a client
bootstrapped at one broker produces to and consumes from both; `--tls` serves Kafka over TLS
with the try-out's self-signed certificate, with one broker, with `--brokers 2` (every door of
each broker) and with `--ha` (the master leads, as plaintext) (docs/kafka.md, "skiff up")."""

from __future__ import annotations

import re
import socket
import ssl
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from skiff.client import Admin, ClientConfig, TlsClientConfig
from skiff.testing.processes import SkiffProcess, free_port, start_skiff
from skiff.testing.up_ha import UpHa, free_ports_apart, started_on_free_ports
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


def leaders(config: dict[str, Any], topic: str) -> dict[int, str]:
    """The leader's host:port of each partition of ``topic``, as the Metadata at ``config`` names it."""
    probe = Consumer({**config, "group.id": "up-probe"})
    try:
        meta = probe.list_topics(topic, timeout=5)
        nodes = {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()}
        return {p.id: nodes.get(p.leader, "?") for p in meta.topics[topic].partitions.values()}
    finally:
        probe.close()


def ssl_config(at: str, cert: Path) -> dict[str, Any]:
    """librdkafka over TLS trusting ``cert`` (the host name, 127.0.0.1, checked against it)."""
    return {"bootstrap.servers": at, "security.protocol": "SSL", "ssl.ca.location": str(cert)}


def tls_admin(namesrv: str, cert: Path) -> Admin:
    """Skiff's own client over the remoting door's TLS, verifying the try-out's certificate."""
    tls = TlsClientConfig(auth_server=True, trust_cert_path=str(cert))
    return Admin(client_config=ClientConfig(namesrv, "up-tls-admin", tls=tls))


def plaintext_refused(port: int) -> bool:
    """A plaintext Kafka ApiVersions request to ``port`` gets no answer: the connection is closed."""
    api_versions = struct.pack(">hhih", 18, 0, 1, 4) + b"test"  # api key, version, correlation id, client id
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(struct.pack(">i", len(api_versions)) + api_versions)
        try:
            return sock.recv(4) == b""
        except ConnectionResetError:
            return True


def grpc_tls_alpn(port: int, cert: Path) -> str | None:
    """The protocol a TLS handshake with the gRPC door at ``port`` agrees on, the certificate
    and host name verified (a plaintext door fails the handshake)."""
    context = ssl.create_default_context(cafile=str(cert))
    context.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return tls.selected_alpn_protocol()


def through_each(configs: list[dict[str, Any]], topic: str) -> None:
    """A producer bootstrapped at each broker writes to all four partitions of ``topic`` (two per
    broker), and a consumer at each reads every record of both, in order."""
    tags = [f"via-{i}" for i in range(len(configs))]
    for config, tag in zip(configs, tags):
        produce(config, topic, 4, tag)
    for config in configs:
        read = consume(config, topic, 4, len(configs) * COUNT)
        assert sorted(read) == [0, 1, 2, 3]
        for partition, values in read.items():
            for tag in tags:  # every record of each producer, in order
                assert [v for v in values if v.startswith(tag)] == [
                    f"{tag}-{i}" for i in range(COUNT) if i % 4 == partition]


def test_each_broker_of_up_brokers_serves_kafka(tmp_path: Path) -> None:
    kafka = 0

    def start() -> SkiffProcess:
        nonlocal kafka
        base, kafka = free_ports_apart((0, 1, 10, 11)), free_ports_apart((0, 10))
        return start_skiff(["up", "--brokers", "2", "--dir", str(tmp_path), "--namesrv-port", "0",
                            "--broker-port", str(base), "--grpc-port", "0", "--metrics-port", "0",
                            "--namesrv-metrics-port", "0", "--kafka-port", str(kafka), "--no-dashboard"],
                           timeout_s=60)

    proc, ready = started_on_free_ports(start, r"skiff up --brokers 2: NameServer (\S+),")
    try:
        ns = ready[1]
        printed = dict(re.findall(r"(broker-[ab]): pid \d+, .*?Kafka clients at (\S+),", proc.output))
        listeners = [f"127.0.0.1:{kafka}", f"127.0.0.1:{kafka + 10}"]
        assert printed == {"broker-a": listeners[0], "broker-b": listeners[1]}
        topic = "UpBrokersKafka"
        with Admin(ns) as admin:
            assert len(admin.create_topic(topic, queue_nums=2)) == 2  # partitions 0-1 on broker-a, 2-3 on broker-b
        for at in listeners:
            wait_for(lambda: brokers_listed({"bootstrap.servers": at}, listeners), 30,
                     f"the Metadata of {at} listing both brokers")
        through_each([{"bootstrap.servers": at} for at in listeners], topic)
    finally:
        assert proc.stop() == 0


@pytest.mark.slow
def test_up_brokers_tls_serves_every_door_of_each_broker_over_tls(tmp_path: Path) -> None:
    """`skiff up --brokers 2 --tls`: one certificate, printed; each broker's remoting door (Skiff's
    Admin), gRPC door (a verified TLS handshake agreeing on h2) and Kafka listener (librdkafka
    producing and consuming through each broker) over TLS, and its Kafka listener refuses plaintext."""
    grpc = kafka = 0

    def start() -> SkiffProcess:
        nonlocal grpc, kafka
        base, grpc, kafka = free_ports_apart((0, 1, 10, 11)), free_ports_apart((0, 10)), free_ports_apart((0, 10))
        return start_skiff(["up", "--brokers", "2", "--tls", "--dir", str(tmp_path), "--namesrv-port", "0",
                            "--broker-port", str(base), "--grpc-port", str(grpc), "--metrics-port", "0",
                            "--namesrv-metrics-port", "0", "--kafka-port", str(kafka), "--no-dashboard"],
                           timeout_s=60)

    proc, ready = started_on_free_ports(start, r"skiff up --brokers 2: NameServer (\S+),")
    try:
        ns = ready[1]
        cert = tmp_path / "tls" / "skiff.crt"
        printed = proc.wait_for_line(r"TLS only .*self-signed certificate (\S+):.*ssl\.ca\.location=(\S+) ", 10)
        assert Path(printed[1]) == Path(printed[2]) == cert.resolve()
        listeners = [f"127.0.0.1:{kafka}", f"127.0.0.1:{kafka + 10}"]
        topic = "UpBrokersKafkaTls"
        with tls_admin(ns, cert) as admin:  # the NameServer and both brokers' remoting doors over TLS
            assert len(admin.create_topic(topic, queue_nums=2)) == 2
        assert [grpc_tls_alpn(port, cert) for port in (grpc, grpc + 10)] == ["h2", "h2"]
        configs = [ssl_config(at, cert) for at in listeners]
        for config in configs:
            wait_for(lambda: brokers_listed(config, listeners), 30, "the Metadata over TLS listing both brokers")
        through_each(configs, topic)
        assert plaintext_refused(kafka + 10), "broker-b's Kafka listener answered plaintext"
    finally:
        assert proc.stop() == 0


@pytest.mark.slow
def test_up_ha_master_serves_kafka_over_tls_and_leads(tmp_path: Path) -> None:
    """`skiff up --ha --tls`: librdkafka produces and consumes through the master's Kafka port over
    TLS, and the Metadata of either broker's listener names the master's as every partition's leader."""
    kafka = free_ports_apart((0, 10))
    with UpHa(tmp_path, "--tls", "--kafka-port", str(kafka), "--no-dashboard") as up:
        assert up.proc is not None
        cert = up.store / "tls" / "skiff.crt"
        ports = dict(re.findall(r"id (\d+): pid \d+, .*?Kafka clients at (\S+),", up.proc.output))
        assert sorted(ports.values()) == [f"127.0.0.1:{kafka}", f"127.0.0.1:{kafka + 10}"]
        master = ports[str(up.master_id)]
        slave = next(at for at in ports.values() if at != master)
        topic = "UpHaKafkaTls"
        with tls_admin(up.namesrv_addr, cert) as admin:
            assert len(admin.create_topic(topic, queue_nums=2)) == 1
        for at in (master, slave):
            wait_for(lambda: leaders(ssl_config(at, cert), topic) == {0: master, 1: master}, 30,
                     f"the Metadata of {at} naming the master {master} as leader")
        produce(ssl_config(master, cert), topic, 2, "ha")
        read = consume(ssl_config(master, cert), topic, 2, COUNT)
        assert read == {p: [f"ha-{i}" for i in range(COUNT) if i % 2 == p] for p in (0, 1)}


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
