"""`produce_wire` reads one-partition Produce requests as the schema interpreter does, declines
everything else, and writes success answers byte for byte as the interpreter would."""

from __future__ import annotations

import random

import pytest

from skiff.broker.kafka.produce import Stored, answer_frame, partition_body
from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.frames import RequestHeader, decode_request, encode_response, read_header
from skiff.protocol.kafka.produce_wire import FIRST_VERSION, LAST_VERSION, ProduceOne, parse_produce, parse_produce_py
from skiff.protocol.kafka.records import Record, encode_batch
from skiff.protocol.kafka.schema import encode
from skiff.protocol.kafka.wire import Writer
from tests.unit.kernel_twins import compiled_kernels

compiled = compiled_kernels("skiff.protocol.kafka._records")

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)


def _frame(version: int, body: dict[str, object], client_id: str | None = "rdkafka", key: int = ApiKey.PRODUCE,
           correlation: int = 7) -> bytes:
    """A request frame without its size prefix."""
    w = Writer()
    w.int16(key)
    w.int16(version)
    w.int32(correlation)
    w.string(client_id, False)
    encode(w, APIS[ApiKey.PRODUCE].request, version, body)
    return bytes(w.buf)


def _body(topics: list[tuple[str, list[tuple[int, bytes | None]]]], acks: int = -1,
          transactional_id: str | None = None) -> dict[str, object]:
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 30_000,
            "topic_data": [{"name": name, "partition_data": [{"index": i, "records": r} for i, r in parts]}
                           for name, parts in topics]}


def test_one_partition_requests_read_as_the_interpreter_reads_them() -> None:
    rng = random.Random(29)
    for _ in range(300):
        version = rng.choice(VERSIONS)
        topic = rng.choice(["t", "Topic-ü", "x" * rng.randint(1, 200)])
        records = encode_batch(0, [Record(k, 1_700_000_000_000 + k, rng.choice([None, b"k"]), rng.randbytes(
            rng.randint(0, 300))) for k in range(rng.randint(1, 5))])
        acks = rng.choice([-1, 0, 1])
        client_id = rng.choice(["rdkafka", "", None, "é" * 3])
        frame = _frame(version, _body([(topic, [(rng.randint(0, 99), records)])], acks), client_id,
                       correlation=rng.randint(-2**31, 2**31 - 1))
        header, body = read_header(frame)
        req = decode_request(header, body)
        part = req["topic_data"][0]["partition_data"][0]
        assert parse_produce(frame) == ProduceOne(header.correlation_id, version, acks, topic,
                                                  part["index"], part["records"])


@pytest.mark.parametrize("frame", [
    _frame(7, _body([("t", [(0, b"x" * 61), (1, b"x" * 61)])])),  # two partitions
    _frame(7, _body([("t", [(0, b"x" * 61)]), ("u", [(0, b"x" * 61)])])),  # two topics
    _frame(7, _body([("t", [(0, b"x" * 61)])], transactional_id="txn")),
    _frame(7, _body([("t", [(0, None)])])),  # null records
    _frame(7, _body([("t", [(0, b"x" * 61)])]))[:-1],  # cut short
    _frame(7, _body([("t", [(0, b"x" * 61)])])) + b"\x00",  # a byte left over
    _frame(2, _body([("t", [(0, b"x" * 61)])])),  # a version Skiff does not serve
    _frame(9, _body([("t", [(0, b"x" * 61)])])),
    _frame(7, _body([("t", [(0, b"x" * 61)])]), key=ApiKey.FETCH),
    b"\x00\x00\x00\x07",
], ids=["two-partitions", "two-topics", "transactional", "null-records", "cut", "left-over", "v2", "v9", "fetch",
        "short"])
def test_anything_else_is_declined(frame: bytes) -> None:
    assert parse_produce(frame) is None
    assert parse_produce_py(frame) is None


def test_the_compiled_reader_reads_as_the_reference() -> None:
    kernel = compiled("parse_produce")
    rng = random.Random(26)
    parsed = 0
    for _ in range(2000):
        version = rng.choice([*VERSIONS, 2, 9])
        topics = [(rng.choice(["t", "Topic-ü", "x" * rng.randint(1, 300)]),
                   [(rng.randint(-5, 2**31 - 1), rng.choice([None, b"", rng.randbytes(rng.randint(1, 90))]))
                    for _ in range(rng.choice([1, 1, 1, 2]))]) for _ in range(rng.choice([1, 1, 1, 2]))]
        frame = bytearray(_frame(version, _body(topics, rng.choice([-1, 0, 1]), rng.choice([None, None, "txn"])),
                                 rng.choice(["rdkafka", "", None, "é" * 3]), rng.choice([ApiKey.PRODUCE] * 5 + [1]),
                                 rng.randint(-2**31, 2**31 - 1)))
        how = rng.random()
        if how < 0.3:  # a flipped bit anywhere: sizes, counts, a name that is no longer UTF-8
            frame[rng.randrange(len(frame))] ^= 1 << rng.randrange(8)
        elif how < 0.4:
            del frame[rng.randrange(len(frame)):]
        elif how < 0.5:
            frame += rng.randbytes(rng.randint(1, 4))
        got = kernel(bytes(frame), ProduceOne)
        assert got == parse_produce_py(bytes(frame))
        parsed += got is not None
        assert kernel(frame, ProduceOne) is None  # bytes only
    assert parsed > 150  # (185 with this seed: most frames are declined, as they should be)


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_are_the_interpreters_bytes(version: int) -> None:
    rng = random.Random(version)
    for _ in range(50):
        req = ProduceOne(rng.randint(-2**31, 2**31 - 1), version, -1, rng.choice(["t", "Tópic"]),
                         rng.randint(0, 1000), b"")
        header = RequestHeader(ApiKey.PRODUCE, version, req.correlation_id, "c")
        for stored in (Stored(base_offset=rng.randint(0, 2**40), log_start_offset=rng.randint(-1, 100)),
                       Stored(base_offset=5),  # a duplicate's answer: no log start
                       Stored(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message="gap")):
            expected = encode_response(header, {"responses": [{"name": req.topic, "partition_responses": [
                partition_body(req.partition, stored)]}], "throttle_time_ms": 0})
            assert answer_frame(req, stored) == expected
