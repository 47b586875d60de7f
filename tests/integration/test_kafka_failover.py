"""A controller-mode failover under librdkafka's idempotent producer (acks=all): the master is
killed -9 while keyed records flow; the elected slave serves the Kafka listener (Metadata names
it), the producer goes on without an error, and a consumer reads every acknowledged record
exactly once, in order per partition, at the offset its acknowledgement gave. The new master
walked the replicated CommitLog for the producer state before its first Produce, so a retry of
a batch the old master stored (and replicated) is answered as a duplicate, not stored again or
refused: the test sends such retries itself on the wire (librdkafka retries only the batches
whose answers the kill cut off, which a run may not have), and the next sequence is accepted,
a gap refused (docs/kafka.md, "Producer state across failovers")."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import Record, encode_batch

from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.failover import equals, master_of, sync_set
from skiff.testing.ha import ControllerGroup
from skiff.testing.processes import SkiffProcess, free_port
from skiff.testing.waits import eventually, wait_for
from tests.integration.test_kafka_wire import Wire, end_offset, produce_body

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

TOPIC = "KafkaFailover"
RETRIED = "KafkaFailoverRetried"
"""The topic of the wire producer's batches (its partition 0)."""
PARTITIONS = 2
KEYS = 6


class KafkaControllerGroup(ControllerGroup):
    """Each broker with its own Kafka port (two brokers on one address)."""

    def __init__(self, root: Path, etcd_endpoint: str, broker_args: Sequence[str]) -> None:
        super().__init__(root, etcd_endpoint, broker_args=broker_args)
        self.kafka_ports = {i: free_port() for i in self.broker_ids}

    def start_broker(self, broker_id: int, *extra: str) -> SkiffProcess:
        return super().start_broker(broker_id, f"--kafkaListenPort={self.kafka_ports[broker_id]}", *extra)

    def kafka(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.kafka_ports[broker_id]}"


class Sent:
    """What the producer thread sent and what was acknowledged, (partition, offset) -> value."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.errors: list[str] = []
        self.produced = 0
        self.running = True

    def report(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

    @property
    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)


def produce(producer: Producer, sent: Sent) -> None:
    """Keyed records 0, 1, 2, ... as fast as the producer takes them, a few per millisecond."""
    i = 0
    while sent.running:
        key = f"k{i % KEYS}"
        producer.produce(TOPIC, f"{key}:{i}".encode(), key=key.encode(), on_delivery=sent.report)
        sent.produced = i = i + 1
        producer.poll(0.002)
    producer.flush(60)


class WireProducer:
    """One producer id's batches on partition 0 of `RETRIED`, a connection per request to
    whichever broker is asked."""

    def __init__(self, bootstrap: str) -> None:
        wire = Wire(bootstrap)
        try:
            meta = wire.call(ApiKey.METADATA, 5, {"topics": [{"name": RETRIED}], "allow_auto_topic_creation": True})
            assert meta["topics"][0]["error_code"] == 0
            ids = wire.call(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 60_000})
        finally:
            wire.close()
        assert ids["error_code"] == 0
        self.pid = ids["producer_id"]

    def produce(self, bootstrap: str, base_sequence: int, *values: bytes) -> tuple[int, int]:
        """(error code, base offset) of a batch sent with acks=all."""
        records = [Record(i, 1_000 + i, None, v) for i, v in enumerate(values)]
        data = encode_batch(0, records, producer_id=self.pid, producer_epoch=0, base_sequence=base_sequence)
        wire = Wire(bootstrap)
        try:
            part = wire.call(ApiKey.PRODUCE, 8, produce_body(RETRIED, data, acks=-1))["responses"][0][
                "partition_responses"][0]
        finally:
            wire.close()
        return part["error_code"], part["base_offset"]


def stored_end(bootstrap: str) -> int:
    wire = Wire(bootstrap)
    try:
        return end_offset(wire, RETRIED)
    finally:
        wire.close()


def read_all(bootstrap: str, count: int) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-failover-readers",
                        "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out: list[Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg)
        end = time.monotonic() + 1  # anything past the count (a duplicate) would arrive now
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
    finally:
        consumer.close()
    return out


def test_an_idempotent_producer_crosses_a_master_kill(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, KafkaControllerGroup(
            tmp_path, etcd.endpoint, ["--slaveTimeout=1000", f"--defaultTopicQueueNums={PARTITIONS}",
                                      "--slaveSyncInterval=500"]) as group:
        first = asyncio.run(eventually(lambda: master_of(group), 20, "a master elected"))
        other = next(i for i in group.broker_ids if i != first)
        asyncio.run(eventually(lambda: equals(sync_set(group, first), "1,2"), 30, "both in the SyncStateSet"))
        bootstrap = ",".join(group.kafka(i) for i in group.broker_ids)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 60_000})
        producer.produce(TOPIC, b"seed", key=b"seed", on_delivery=lambda err, msg: None)  # auto-creates it
        assert producer.flush(30) == 0
        sent = Sent()
        thread = threading.Thread(target=produce, args=(producer, sent))
        thread.start()
        try:
            wait_for(lambda: sent.acked_count > 300, 30, "records acknowledged by the first master")
            wire = WireProducer(group.kafka(first))
            assert wire.produce(group.kafka(first), 0, b"a", b"b", b"c") == (0, 0)
            assert wire.produce(group.kafka(first), 3, b"d", b"e") == (0, 3)  # on both brokers (SYNC_MASTER)
            group.kill_broker(first)
            assert asyncio.run(eventually(lambda: master_of(group), 20, "the other broker elected")) == other
            new = group.kafka(other)
            # the last batch again, a retry across the failover, until the new master serves it
            wait_for(lambda: wire.produce(new, 3, b"d", b"e")[0] == ErrorCode.NONE, 20, "the new master's answer")
            assert wire.produce(new, 3, b"d", b"e") == (0, 3)
            assert stored_end(new) == 5, "a retried batch was stored again"
            assert wire.produce(new, 0, b"a", b"b", b"c") == (0, 0)  # an earlier batch kept is a duplicate too
            assert wire.produce(new, 7, b"h")[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap
            assert wire.produce(new, 5, b"f", b"g") == (0, 5)
            assert stored_end(new) == 7
            after = sent.acked_count
            wait_for(lambda: sent.acked_count > after + 300, 40, "records acknowledged by the new master")
        finally:
            sent.running = False
            thread.join(90)
        assert not thread.is_alive()
        assert sent.errors == []
        assert len(sent.acked) == sent.produced  # every record acknowledged, none lost by the flush

        meta = producer.list_topics(TOPIC, timeout=10)
        assert [f"{b.host}:{b.port}" for b in meta.brokers.values()] == [group.kafka(other)]
        assert {p.leader for p in meta.topics[TOPIC].partitions.values()} == set(meta.brokers)
        group.proc(other).wait_for_line(r"master now: \d+ more idempotent Kafka batches", 10)

        records = read_all(group.kafka(other), len(sent.acked) + 1)
    stored = [(m.partition(), m.offset(), m.value()) for m in records if m.value() != b"seed"]
    values = [v for _, _, v in stored]
    assert len(values) == len(set(values)), "a record stored twice"
    assert {(p, o): v for p, o, v in stored} == sent.acked  # each at the offset its acknowledgement named
    for partition in range(PARTITIONS):
        numbers: dict[str, list[int]] = {}
        for p, _, v in stored:
            if p == partition:
                key, number = v.decode().split(":")
                numbers.setdefault(key, []).append(int(number))
        assert all(n == sorted(n) for n in numbers.values()), f"partition {partition} out of order"
    print(f"{len(values)} records, {sent.produced} produced")
