"""The Kafka listener's Produce requests served together (`produce_now`: one-partition requests
of a read appended per queue, answered in one write) answer and store exactly what the
general path (`KafkaService.handle`, one request at a time, the schema interpreter) does, on
a random request stream cut into random reads: idempotent producers' duplicates dropped and
gaps refused, acks=0 unanswered, corrupt batches, unknown partitions, multi-partition
requests and other APIs in between, answers in request order."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from skiff.bench.kafka_path import KafkaConnection
from skiff.broker.kafka.service import KafkaService
from skiff.common.clock import ManualClock
from skiff.common.stored_message import decode_records
from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.frames import encode_request, read_header
from skiff.protocol.kafka import records as kafka_records
from skiff.protocol.kafka.records import Record, encode_batch
from skiff.protocol.kafka.schema import decode
from skiff.protocol.kafka.wire import Reader
from skiff.testing.inprocess import in_process_broker

TOPIC = "KafkaReads"
QUEUES = 4
NOW = 1_700_000_000_000


def _frame(key: int, version: int, correlation: int, body: dict[str, object]) -> bytes:
    return encode_request(ApiKey(key), version, correlation, body, "twin")


def _produce(correlation: int, parts: list[tuple[int, bytes]], acks: int, version: int) -> bytes:
    return _frame(ApiKey.PRODUCE, version, correlation, {
        "transactional_id": None, "acks": acks, "timeout_ms": 30_000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": p, "records": r} for p, r in parts]}]})


def stream(seed: int, count: int, plain: float = 0.0) -> tuple[list[bytes], int]:
    """``count`` requests as a few producers send them and a last ApiVersions, and how many are
    answered; ``plain``: the share of batches of keyless records without headers (a batching
    producer's usual ones, which the compiled decoder reads straight into store rows)."""
    rng = random.Random(seed)
    sequences: dict[tuple[int, int], int] = {}
    sent: dict[tuple[int, int], list[bytes]] = {}
    frames, answered = [], 0
    for n in range(1, count + 1):
        kind = rng.random()
        acks = rng.choice([-1, -1, -1, 1, 0])
        if kind < 0.04:
            frames.append(_frame(ApiKey.API_VERSIONS, 2, n, {}))
            answered += 1
            continue
        partition = rng.randrange(QUEUES + 1) if rng.random() < 0.05 else rng.randrange(QUEUES)
        records = [Record(k, NOW + n, rng.choice([None, b"key-%d" % rng.randrange(5), b"\xff\x00"]),
                          rng.choice([None, rng.randbytes(rng.randint(0, 200))]),
                          rng.choice([(), (("h", b"v"),), (("bin", b"\x01\xff"), ("null", None))]))
                   for k in range(rng.choice([1, 1, 1, 3]))]
        if rng.random() < plain:
            records = [Record(k, NOW + n + k, None, rng.randbytes(rng.randint(0, 200)))
                       for k in range(rng.choice([1, 3, 40]))]
        if kind < 0.5:
            pid = rng.choice([1 << 20, 2 << 20])
            seq = sequences.get((pid, partition), 0)
            if kind < 0.1 and sent.get((pid, partition)):  # a retry of one of the last batches
                batch = rng.choice(sent[(pid, partition)][-5:])
            else:
                if kind < 0.13:
                    seq += 2  # a gap: refused, and the next in sequence is still expected
                batch = encode_batch(0, records, producer_id=pid, producer_epoch=0, base_sequence=seq)
                if kind >= 0.13:
                    sequences[(pid, partition)] = seq + len(records)
                    sent.setdefault((pid, partition), []).append(batch)
        else:
            batch = encode_batch(0, records)
            if kind > 0.97:  # a corrupt batch: its CRC fails
                batch = batch[:-1] + bytes([batch[-1] ^ 1])
        parts = [(partition, batch)]
        if rng.random() < 0.05:
            parts.append(((partition + 1) % QUEUES, encode_batch(0, records)))
        frames.append(_produce(n, parts, acks, rng.choice([3, 5, 7, 8])))
        answered += acks != 0
    frames.append(_frame(ApiKey.API_VERSIONS, 2, count + 1, {}))  # answered after all before it
    return frames, answered + 1


def cut(frames: list[bytes], rng: random.Random) -> list[bytes]:
    """The frames' bytes in reads of random lengths (whole frames and pieces of them)."""
    data, reads, pos = b"".join(frames), [], 0
    while pos < len(data):
        n = rng.choice([1, 7, 60, 200, 1000, 5000, 20000])
        reads.append(data[pos:pos + n])
        pos += n
    return reads


async def serve(root: Path, reads: list[bytes], answers: int, sync_flush: bool) -> tuple[bytes, list[list[tuple]]]:
    """The answers' bytes, and each queue's stored messages (body, properties, born time)."""
    async with in_process_broker(root, clock=ManualClock(), sync_flush=sync_flush) as broker:
        await broker.start_kafka(0)
        broker.topics.find_or_create(TOPIC, QUEUES, 6)
        conn = KafkaConnection(broker)
        for data in reads:
            conn.feed(data)
            await asyncio.sleep(0)
        await conn.wait_answers(answers)
        queues = []
        for q in range(QUEUES):
            got = broker.store.get_messages(TOPIC, q, 0, 10_000)
            queues.append([(m.body, dict(m.properties), m.born_timestamp)
                           for m in decode_records(b"".join(bytes(b) for b in got.buffers))])
        return bytes(conn.transport.out), queues


def _produce_errors(out: bytes) -> list[int]:
    errors, pos = [], 0
    api = APIS[ApiKey.PRODUCE]
    while pos < len(out):
        size = int.from_bytes(out[pos:pos + 4], "big")
        body = out[pos + 4:pos + 4 + size]
        pos += 4 + size
        try:
            answer = decode(Reader(body, 4), api.response, 3)
        except Exception:
            continue  # not a Produce answer (ApiVersions), or a version whose fields differ
        errors += [p["error_code"] for t in answer["responses"] for p in t["partition_responses"]]
    return errors


@pytest.mark.parametrize("seed,sync_flush", [(1, False), (3, True)])
def test_reads_served_together_answer_and_store_as_one_at_a_time(tmp_path: Path, seed: int, sync_flush: bool,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    frames, answers = stream(seed, 400)
    assert all(read_header(f[4:])[0].api_key in (ApiKey.PRODUCE, ApiKey.API_VERSIONS) for f in frames)
    together = asyncio.run(serve(tmp_path / "together", cut(frames, random.Random(seed)), answers, sync_flush))
    monkeypatch.setattr(KafkaService, "serves", lambda self, session: False)
    alone = asyncio.run(serve(tmp_path / "alone", frames, answers, sync_flush))
    assert together[0] == alone[0]
    assert together[1] == alone[1]
    errors = _produce_errors(alone[0])
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER in errors and ErrorCode.CORRUPT_MESSAGE in errors
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION in errors and errors.count(0) > 200
    assert sum(len(q) for q in alone[1]) > 200


def test_batches_read_straight_into_rows_store_as_the_record_path(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled decoder's rows (`decode_plain_rows`) against the `Record` path's (the kernel
    off): the same answers and the same stored messages, an idempotent batch's recording
    property on its last message included."""
    frames, answers = stream(5, 300, plain=0.7)
    reads = cut(frames, random.Random(5))
    compiled = asyncio.run(serve(tmp_path / "compiled", reads, answers, False))
    monkeypatch.setattr(kafka_records, "_plain_rows", kafka_records.no_plain_rows)
    reference = asyncio.run(serve(tmp_path / "reference", reads, answers, False))
    assert compiled[0] == reference[0]
    assert compiled[1] == reference[1]
    stored = [m for q in reference[1] for m in q]
    assert len(stored) > 2000 and sum(1 for m in stored if "KAFKA_PRODUCER" in m[1]) > 20
