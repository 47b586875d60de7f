"""The compiled ``decode_plain_rows`` (`skiff/protocol/kafka/_records.pyx`) makes the rows its
reference `decode_plain_rows_py` makes, field for field, or declines (None): on random plain
batches, batches with keys, headers, null values, compressed, transactional and damaged ones."""

from __future__ import annotations

import gc
import random

import crc32c

from skiff.protocol.kafka.records import (
    CONTROL,
    TRANSACTIONAL,
    Record,
    RecordBatch,
    decode_batches_py,
    decode_plain_rows_py,
    encode_batch,
)
from skiff.store import MessageInput
from tests.unit.kernel_twins import compiled_kernels, damaged

compiled = compiled_kernels("skiff.protocol.kafka._records")
_AT = ("Topic-ü", 3, b"\x7f\x00\x00\x01\x00\x00\x30\x39")


def _plain(rng: random.Random) -> list[Record]:
    base = rng.choice([0, 1_700_000_000_000, -5, 2**62])
    return [Record(k, base + rng.randint(-10**6, 10**6), None, rng.choice([b"", rng.randbytes(rng.randint(1, 400))]))
            for k in range(rng.choice([1, 2, 5, 256]))]


def _batch(rng: random.Random, records: list[Record], **kw: int) -> bytes:
    return encode_batch(rng.randint(0, 2**40), records, producer_id=rng.choice([-1, 2**50]),
                        producer_epoch=rng.choice([-1, 0, 7]), base_sequence=rng.choice([-1, 0, 2**31 - 1]), **kw)


def _both(data: bytes) -> tuple[object, object]:
    kernel = compiled("decode_plain_rows")
    return (kernel(data, crc32c.crc32c, RecordBatch, MessageInput, *_AT),
            decode_plain_rows_py(data, crc32c.crc32c, RecordBatch, MessageInput, *_AT))


def test_plain_batches_make_the_references_rows() -> None:
    rng = random.Random(29)
    for _ in range(300):
        records = _plain(rng)
        data = _batch(rng, records)
        got, expected = _both(data)
        assert got is not None and got == expected
        head, rows, total = got  # type: ignore[misc]  # checked: not None
        assert [type(r) for r in rows] == [MessageInput] * len(records)
        assert not any(map(gc.is_tracked, rows))  # rows of plain fields: never in a cycle
        assert [(r.body, r.born_timestamp, r.topic, r.queue_id, r.born_host) for r in rows] == \
            [(r.value, r.timestamp, *_AT) for r in records]
        assert rows[0] == MessageInput(_AT[0], _AT[1], records[0].value or b"", b"", 0, 0, records[0].timestamp, _AT[2])
        assert total == sum(len(r.value or b"") for r in records)
        assert head == decode_batches_py(data)[0]._replace(records=())


def test_what_the_record_path_maps_is_declined() -> None:
    """A key, a header, a null value, a codec, a transactional or control batch, two batches,
    no records: the caller's `Record` path (with the writer's mapping) serves those."""
    rng = random.Random(30)
    keyed = [Record(0, 1, b"k", b"v")]
    headed = [Record(0, 1, None, b"v", (("h", b"x"),))]
    tombstone = [Record(0, 1, None, None)]
    plain = [Record(0, 1, None, b"v"), Record(1, 2, None, b"w")]
    for data in (_batch(rng, plain[:1] + keyed), _batch(rng, headed + plain), _batch(rng, plain + tombstone),
                 _batch(rng, plain, codec=1), _batch(rng, plain, codec=4), _batch(rng, plain, attributes=TRANSACTIONAL),
                 _batch(rng, plain, attributes=CONTROL), _batch(rng, plain) * 2, _batch(rng, [])):
        assert _both(data) == (None, None)
    assert _both(b"") == (None, None)
    assert compiled("decode_plain_rows")(bytearray(_batch(rng, plain)), crc32c.crc32c, RecordBatch, MessageInput,
                                         *_AT) is None  # bytes only


def test_damaged_batches_are_declined_or_read_as_the_reference() -> None:
    rng = random.Random(31)
    declined = 0
    for _ in range(1500):
        data = damaged(rng, _batch(rng, _plain(rng)), flip=0.5, cut=0.3, tail=40)
        got, expected = _both(data)
        if got is None:
            declined += 1
        else:
            assert got == expected
    assert declined > 1000
