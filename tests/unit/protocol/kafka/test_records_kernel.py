"""The compiled record batch decoder (`skiff/protocol/kafka/_records.pyx`) decodes what the
reference does, or declines (None) where the reference decompresses or raises."""

from __future__ import annotations

import random

import crc32c
import pytest

from skiff.common.errors import DecodeError
from skiff.protocol.kafka.records import (
    Record,
    RecordBatch,
    decode_batches,
    decode_batches_py,
    encode_batch,
    encode_records,
    encode_records_py,
)
from tests.unit.kernel_twins import compiled_kernels, damaged

compiled = compiled_kernels("skiff.protocol.kafka._records")


def _records(rng: random.Random) -> list[Record]:
    base = rng.choice([0, 1_700_000_000_000, -5, 2**62])
    return [Record(k * rng.choice([1, 3]), base + rng.randint(-10**6, 10**6),
                   rng.choice([None, b"", rng.randbytes(rng.randint(1, 40))]),
                   rng.choice([None, b"", rng.randbytes(rng.randint(1, 400))]),
                   tuple((rng.choice(["h", "ü", "x" * 200]), rng.choice([None, b"", rng.randbytes(9)]))
                         for _ in range(rng.choice([0, 0, 1, 3]))))
            for k in range(rng.choice([1, 1, 2, 5, 130]))]


def _data(rng: random.Random) -> bytes:
    return b"".join(encode_batch(rng.randint(0, 2**40), _records(rng), producer_id=rng.choice([-1, 2**50]),
                                 producer_epoch=rng.choice([-1, 0, 7]), base_sequence=rng.choice([-1, 0, 2**31 - 1]))
                    for _ in range(rng.choice([1, 1, 2])))


def _reference(data: bytes) -> list[RecordBatch] | DecodeError:
    try:
        return decode_batches_py(data)
    except DecodeError as exc:
        return exc


def test_clean_batches_decode_as_the_reference() -> None:
    kernel = compiled("decode_plain_batches")
    rng = random.Random(26)
    for _ in range(400):
        data = _data(rng)
        assert kernel(data, crc32c.crc32c, Record, RecordBatch) == decode_batches_py(data)
        assert decode_batches(data) == decode_batches_py(data)
    assert kernel(b"", crc32c.crc32c, Record, RecordBatch) == []


def test_damaged_or_compressed_batches_are_left_to_the_reference() -> None:
    kernel = compiled("decode_plain_batches")
    rng = random.Random(29)
    declined = 0
    for _ in range(1500):
        data = damaged(rng, _data(rng), flip=0.4, cut=0.3, tail=70)
        got = kernel(data, crc32c.crc32c, Record, RecordBatch)
        expected = _reference(data)
        if got is None:
            declined += 1
        else:
            assert got == expected
        assert kernel(bytearray(data), crc32c.crc32c, Record, RecordBatch) is None  # bytes only
    assert declined > 1000
    compressed = encode_batch(0, [Record(0, 1, None, b"v" * 50)], codec=1)
    assert kernel(compressed, crc32c.crc32c, Record, RecordBatch) is None
    assert decode_batches(compressed)[0].records[0].value == b"v" * 50


@pytest.mark.parametrize("varint", [b"\x80" * 9 + b"\x01", b"\xff" * 9 + b"\x7f"])
def test_ten_byte_varints_are_left_to_the_reference(varint: bytes) -> None:
    kernel = compiled("decode_plain_batches")
    body = b"\x00" + varint + b"\x00" + b"\x01" + b"\x01" + b"\x00"  # attrs, ts delta, offset, null key/value, no headers
    record = bytes([len(body) * 2]) + body
    head = encode_batch(0, [Record(0, 0, None, None)])[:61]
    length = 61 - 12 + len(record)
    raw = head[:8] + length.to_bytes(4, "big") + head[12:57] + (1).to_bytes(4, "big") + record
    data = raw[:17] + crc32c.crc32c(raw[21:]).to_bytes(4, "big") + raw[21:]
    assert kernel(data, crc32c.crc32c, Record, RecordBatch) is None
    assert decode_batches(data) == decode_batches_py(data)


def test_records_encode_as_the_reference() -> None:
    kernel = compiled("encode_records")
    rng = random.Random(12)
    for _ in range(400):
        records = _records(rng)
        base = records[0].timestamp + rng.choice([0, -3, 10**6])
        assert kernel(records, base) == encode_records_py(records, base)
        assert encode_records(records, base) == encode_records_py(records, base)
    assert kernel([], 0) == b""


@pytest.mark.parametrize("record,base", [
    (Record(0, 2**63 + 5, None, b"v"), 0),  # a delta past 64 bits
    (Record(0, 1, bytearray(b"k"), b"v"), 0),  # not bytes
    (Record(0, 1, None, b"v", ((b"name", b"v"),)), 0),  # a header name that is not str
], ids=["wide-delta", "bytearray-key", "bytes-name"])
def test_records_it_does_not_write_exactly_are_left_to_the_reference(record: Record, base: int) -> None:
    assert compiled("encode_records")([record], base) is None
