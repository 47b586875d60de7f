"""The Kafka listener on the wire: requests it does not serve are answered with Kafka's
UNSUPPORTED_VERSION and the connection stays usable; Produce with acks=0 gets no answer;
Fetch is long-polled (held until max_wait_ms, answered early when a message arrives);
a Produce whose batch fails its CRC is refused CORRUPT_MESSAGE and nothing is stored."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import Record, decode_batches, encode_batch
from skiff.protocol.kafka.schema import decode, encode
from skiff.protocol.kafka.wire import Reader, Writer
from skiff.testing.cluster import Cluster
from tests.integration.kafka_kit import kafka_cluster

pytestmark = pytest.mark.xdist_group("kafka-wire")  # one worker, one cluster: the fixture is set up once


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    with kafka_cluster(tmp_path_factory.mktemp("kafka-wire"), "--defaultTopicQueueNums=1") as c:
        yield c


class Wire:
    """One connection speaking Kafka frames with Skiff's codec."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, key: int, version: int, body: bytes) -> int:
        self.correlation += 1
        w = Writer()
        w.int16(key)
        w.int16(version)
        w.int32(self.correlation)
        w.string("wire-test")
        frame = bytes(w.buf) + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return self.correlation

    def send(self, key: ApiKey, version: int, body: dict[str, Any]) -> int:
        w = Writer()
        encode(w, APIS[key].request, version, body)
        return self.send_raw(key, version, bytes(w.buf))

    def read_frame(self) -> Reader:
        size = struct.unpack(">i", self._exactly(4))[0]
        return Reader(self._exactly(size))

    def read(self, key: ApiKey, version: int) -> tuple[int, dict[str, Any]]:
        r = self.read_frame()
        correlation = r.int32()
        return correlation, decode(r, APIS[key].response, version)

    def call(self, key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        sent = self.send(key, version, body)
        correlation, answer = self.read(key, version)
        assert correlation == sent
        return answer

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out


def produce_body(topic: str, records: bytes, acks: int = 1) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


def fetch_body(topic: str, offset: int, max_wait_ms: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def batch(*values: bytes) -> bytes:
    return encode_batch(0, [Record(i, 1_000 + i, None, v) for i, v in enumerate(values)])


def make_topic(wire: Wire, topic: str) -> None:
    meta = wire.call(ApiKey.METADATA, 5, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
    assert meta["topics"][0]["error_code"] == 0 and len(meta["topics"][0]["partitions"]) == 1


def end_offset(wire: Wire, topic: str) -> int:
    answer = wire.call(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    part = answer["topics"][0]["partitions"][0]
    assert part["error_code"] == 0
    return int(part["offset"])


def test_unsupported_requests_are_answered_and_the_connection_stays(kafka: tuple[Cluster, str]) -> None:
    wire = Wire(kafka[1])
    try:
        sent = wire.send_raw(57, 0, b"\x00\x01")  # an API key Skiff does not serve
        r = wire.read_frame()
        assert (r.int32(), r.int16(), r.remaining) == (sent, ErrorCode.UNSUPPORTED_VERSION, 0)
        sent = wire.send_raw(ApiKey.PRODUCE, 2, b"")  # below the advertised Produce range (record format v2 only)
        correlation, answer = wire.read(ApiKey.PRODUCE, 2)
        assert correlation == sent and answer["responses"] == []
        sent = wire.send_raw(ApiKey.API_VERSIONS, 9, b"")  # newer than Skiff's: a v0 answer with its own range
        correlation, versions = wire.read(ApiKey.API_VERSIONS, 0)
        assert correlation == sent and versions["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert versions["api_keys"] == [{"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 4}]
        sent = wire.send_raw(ApiKey.METADATA, 5, b"\x00\x00\x00\x05")  # an array the body cannot hold
        correlation, _ = wire.read(ApiKey.METADATA, 5)
        assert correlation == sent
        versions = wire.call(ApiKey.API_VERSIONS, 2, {})  # the same connection still serves
        assert versions["error_code"] == 0
        assert {v["api_key"] for v in versions["api_keys"]} == set(APIS)
    finally:
        wire.close()


def test_acks_0_gets_no_answer_and_is_stored(kafka: tuple[Cluster, str]) -> None:
    wire = Wire(kafka[1])
    try:
        make_topic(wire, "acks0")
        wire.send(ApiKey.PRODUCE, 8, produce_body("acks0", batch(b"a", b"b"), acks=0))
        # The next answer on the connection is the next request's: the Produce has none.
        assert end_offset(wire, "acks0") == 2
    finally:
        wire.close()


def test_corrupt_batch_is_refused_and_nothing_stored(kafka: tuple[Cluster, str]) -> None:
    wire = Wire(kafka[1])
    try:
        make_topic(wire, "corrupt")
        data = bytearray(batch(b"payload"))
        data[-1] ^= 0x55
        answer = wire.call(ApiKey.PRODUCE, 8, produce_body("corrupt", bytes(data)))
        part = answer["responses"][0]["partition_responses"][0]
        assert part["error_code"] == ErrorCode.CORRUPT_MESSAGE and "CRC" in part["error_message"]
        assert end_offset(wire, "corrupt") == 0
    finally:
        wire.close()


def test_fetch_is_long_polled(kafka: tuple[Cluster, str]) -> None:
    wire = Wire(kafka[1])
    try:
        make_topic(wire, "longpoll")
        started = time.monotonic()
        empty = wire.call(ApiKey.FETCH, 11, fetch_body("longpoll", 0, 800))
        waited = time.monotonic() - started
        part = empty["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and part["records"] == b""  # empty, never null
        assert waited >= 0.75, f"an empty Fetch was answered after {waited:.3f} s, not held for max_wait_ms"

        producer = Wire(kafka[1])
        started = time.monotonic()
        sent = wire.send(ApiKey.FETCH, 11, fetch_body("longpoll", 0, 20_000))  # held: the queue is empty
        producer.call(ApiKey.PRODUCE, 8, produce_body("longpoll", batch(b"woke")))
        producer.close()
        correlation, answer = wire.read(ApiKey.FETCH, 11)
        elapsed = time.monotonic() - started
        assert correlation == sent
        [got] = decode_batches(answer["responses"][0]["partitions"][0]["records"])
        assert [r.value for r in got.records] == [b"woke"]
        assert elapsed < 10, f"the held Fetch was answered {elapsed:.1f} s after it was sent, not when the message came"
    finally:
        wire.close()


def test_idempotent_produce_drops_duplicates_and_refuses_gaps(kafka: tuple[Cluster, str]) -> None:
    wire = Wire(kafka[1])
    try:
        make_topic(wire, "idem")
        ids = wire.call(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None, "transaction_timeout_ms": 60_000})
        assert ids["error_code"] == 0 and ids["producer_id"] >= 0
        pid = ids["producer_id"]

        def produce(base_sequence: int, epoch: int, *values: bytes) -> dict[str, Any]:
            records = [Record(i, 1_000 + i, None, v) for i, v in enumerate(values)]
            data = encode_batch(0, records, producer_id=pid, producer_epoch=epoch, base_sequence=base_sequence)
            answer = wire.call(ApiKey.PRODUCE, 8, produce_body("idem", data, acks=-1))
            return dict(answer["responses"][0]["partition_responses"][0])

        assert produce(0, 0, b"a", b"b")["base_offset"] == 0
        assert produce(2, 0, b"c")["base_offset"] == 2
        retry = produce(0, 0, b"a", b"b")  # a retry of the first batch: answered with its offset, not stored
        assert (retry["error_code"], retry["base_offset"]) == (0, 0)
        gap = produce(5, 0, b"f")
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and "3 was expected" in gap["error_message"]
        assert produce(3, 0, b"d")["base_offset"] == 3
        assert produce(1, 1, b"x")["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0
        assert produce(0, 1, b"e")["base_offset"] == 4
        assert produce(4, 0, b"late")["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH  # fenced by epoch 1
        assert end_offset(wire, "idem") == 5
        fetched = wire.call(ApiKey.FETCH, 11, fetch_body("idem", 0, 0))
        [got] = decode_batches(fetched["responses"][0]["partitions"][0]["records"])
        assert [r.value for r in got.records] == [b"a", b"b", b"c", b"d", b"e"]
    finally:
        wire.close()
