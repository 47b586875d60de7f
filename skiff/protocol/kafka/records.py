"""Kafka record batches, format v2 (magic 2): the only format Skiff reads and writes.

A batch is a 61-byte header (base offset, length, leader epoch, magic, CRC-32C of
everything after the CRC field, attributes, last offset delta, first and max timestamps,
producer id, epoch and base sequence, record count) and its records, compressed as one
block when the attributes name a codec. Each record holds varint deltas against the
header, its key, value and headers.

Codecs come from cramjam (gzip, snappy, lz4 frames, zstd), the CRC from crc32c: both
compiled, both well kept. Snappy has two framings on the wire: the Java client and the
Python clients write xerial's (a magic, then length-prefixed raw blocks), librdkafka
writes a raw block; both are read, told apart by xerial's magic.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

import cramjam
import crc32c

from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.limits import KAFKA_BATCH_INFLATED_MAX_BYTES
from skiff.protocol.kafka.wire import Reader, varint_bytes

HEADER_BYTES = 61
MAGIC = 2
T = TypeVar("T")
_HEADER = struct.Struct(">qiibIhiqqqhii")
"""base offset, batch length, leader epoch, magic, crc, attributes, last offset delta,
base timestamp, max timestamp, producer id, producer epoch, base sequence, record count."""
_CRC_FROM = 21
CODEC_MASK = 0x07
TIMESTAMP_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


class Record(NamedTuple):
    """A NamedTuple: a Fetch makes one per message served, and a frozen dataclass costs
    four times as much to make."""

    offset_delta: int
    timestamp: int
    """Absolute: the batch's base timestamp plus the record's delta."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordBatch(NamedTuple):
    """A NamedTuple: a Produce decodes one per partition batch (one per record when a
    producer sends one record per request), and a frozen dataclass costs three times as much."""

    base_offset: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    records: tuple[Record, ...] = ()
    partition_leader_epoch: int = -1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)


def decode_batches(data: bytes | memoryview) -> list[RecordBatch]:
    """Every batch of a records field, CRCs checked; `DecodeError` names what is wrong
    (a cut batch, another magic, a bad CRC, an unknown codec, records that overrun).
    Uncompressed batches that read cleanly are decoded by the compiled kernel where it is
    built (`_records.pyx`: a Produce of one record decodes one batch per request); the rest by
    `decode_batches_py`."""
    batches = _plain_batches(data, crc32c.crc32c, Record, RecordBatch)
    return decode_batches_py(data) if batches is None else batches


def no_plain_batches(data: bytes | memoryview, crc: Callable[[bytes], int], record: type[Record],
                     batch: type[RecordBatch]) -> list[RecordBatch] | None:
    """The reference of the compiled ``decode_plain_batches``, which decodes what it can read
    exactly as `decode_batches_py` does: this one leaves everything to `decode_batches_py`."""
    return None


def decode_batches_py(data: bytes | memoryview) -> list[RecordBatch]:
    """`decode_batches` in Python: every batch, every codec, every error named."""
    out = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < HEADER_BYTES:
            raise DecodeError(f"a record batch at {pos} is cut short: {len(data) - pos} of {HEADER_BYTES} header bytes")
        (base_offset, length, epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, pepoch, base_seq,
         count) = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != MAGIC:
            raise DecodeError(f"a record batch at {pos} has magic {magic}: only format v2 (magic 2) is served")
        if length < HEADER_BYTES - 12 or end > len(data):
            raise DecodeError(f"a record batch at {pos} says {length} bytes, {len(data) - pos - 12} are there")
        body = bytes(data[pos + _CRC_FROM:end])
        if crc32c.crc32c(body) != crc:
            raise DecodeError(f"the record batch at {pos} fails its CRC-32C check")
        records_raw = body[HEADER_BYTES - _CRC_FROM:]
        codec = attributes & CODEC_MASK
        if codec:
            records_raw = decompress(codec, records_raw)
        records = _decode_records(records_raw, count, base_ts)
        out.append(RecordBatch(base_offset, attributes, last_delta, base_ts, max_ts, pid, pepoch, base_seq,
                               tuple(records), epoch))
        pos = end
    return out


_plain_batches = kernels.select("decode_plain_batches", no_plain_batches, "skiff.protocol.kafka._records")

_INT64 = 1 << 63


def decode_plain_rows(data: bytes, topic: str, queue_id: int, host: bytes,
                      row: Callable[..., T]) -> tuple[RecordBatch, list[T], int] | None:
    """A batching producer's partition batch read straight into store rows: (its header with
    no records, one ``row(topic, queue_id, value, b"", 0, 0, timestamp, host)`` per record, the
    values' total bytes) when ``data`` is one uncompressed batch of keyless records without
    headers that reads cleanly; else None, and the caller decodes it with `decode_batches`
    (which names what is wrong) and maps each `Record`. Compiled where it is built (no
    `Record` and no Python call per record: a batch of librdkafka's defaults holds hundreds);
    without it, None (``no_plain_rows``), so the caller's `Record` path is the reference path."""
    return _plain_rows(data, crc32c.crc32c, RecordBatch, row, topic, queue_id, host)


def no_plain_rows(data: bytes, crc: Callable[[bytes], int], batch: type[RecordBatch], row: Callable[..., T],
                  topic: str, queue_id: int, host: bytes) -> tuple[RecordBatch, list[T], int] | None:
    """What runs without the compiled ``decode_plain_rows``: nothing, the caller's `Record` path does it."""
    return None


def decode_plain_rows_py(data: bytes, crc: Callable[[bytes], int], batch: type[RecordBatch], row: Callable[..., T],
                         topic: str, queue_id: int, host: bytes) -> tuple[RecordBatch, list[T], int] | None:
    """The reference of the compiled ``decode_plain_rows``: `decode_batches_py` and one row per
    record, None wherever the kernel declines (the twin test's spec; the broker's path without the
    kernel is its own `Record` mapping, which makes the same rows)."""
    try:
        batches = decode_batches_py(data)
    except DecodeError:
        return None
    if len(batches) != 1 or batches[0].attributes & (CODEC_MASK | TRANSACTIONAL | CONTROL) or not batches[0].records:
        return None
    head = batches[0]
    rows, total = [], 0
    for _, timestamp, key, value, headers in head.records:
        if key is not None or value is None or headers or not -_INT64 <= timestamp < _INT64:
            return None
        rows.append(row(topic, queue_id, value, b"", 0, 0, timestamp, host))
        total += len(value)
    return batch(*head[:8], (), head.partition_leader_epoch), rows, total


_plain_rows = kernels.select("decode_plain_rows", no_plain_rows, "skiff.protocol.kafka._records")


def _decode_records(raw: bytes, count: int, base_ts: int) -> list[Record]:
    """The records of a batch. One pass over the bytes with the varints read inline (a
    Produce decodes every record it stores; a reader object per record cost a third more)."""
    if count < 0 or count > len(raw):
        raise DecodeError(f"a batch claims {count} records in {len(raw)} bytes")
    out = []
    pos = 0
    size = len(raw)
    try:
        for _ in range(count):
            length, pos = _varint(raw, pos)
            end = pos + length
            if length < 0 or end > size:
                raise DecodeError(f"a record of {length} bytes at {pos} overruns its batch")
            ts_delta, pos = _varint(raw, pos + 1)  # after the unused attributes byte
            offset_delta, pos = _varint(raw, pos)
            key, pos = _varbytes(raw, pos, end)
            value, pos = _varbytes(raw, pos, end)
            n_headers, pos = _varint(raw, pos)
            headers = []
            for _ in range(n_headers):
                hk, pos = _varbytes(raw, pos, end)
                if hk is None:
                    raise DecodeError("a record header has a null key")
                hv, pos = _varbytes(raw, pos, end)
                try:
                    headers.append((hk.decode("utf-8"), hv))
                except UnicodeDecodeError:
                    raise DecodeError(f"a record header key is not UTF-8: {hk!r}") from None
            if pos != end:
                raise DecodeError(f"a record ends at {pos}, its length says {end}")
            out.append(Record(offset_delta, base_ts + ts_delta, key, value, tuple(headers)))
    except IndexError:
        raise DecodeError(f"a record at {pos} runs past the end of its batch") from None
    if pos != size:
        raise DecodeError(f"{size - pos} bytes follow the last of {count} records")
    return out


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos`` and the position after it (IndexError past the end)."""
    b = raw[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    value = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = raw[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos + 1
        shift += 7
        if shift > 63:
            raise DecodeError(f"a varint at {pos} is longer than 10 bytes")


def _varbytes(raw: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = _varint(raw, pos)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise DecodeError(f"a field of {n} bytes at {pos} overruns its record")
    return raw[pos:pos + n], pos + n


def encode_batch(base_offset: int, records: Sequence[Record], *, codec: int = 0, attributes: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 last_offset_delta: int | None = None) -> bytes:
    """One batch of ``records`` (offset deltas and absolute timestamps as given).
    ``last_offset_delta``: when records were removed after the last one kept (a compacted
    range), the batch still spans to its last original offset, so a reader continues after it."""
    base_ts = records[0].timestamp if records else -1
    max_ts = max((r.timestamp for r in records), default=-1)
    body = encode_records(records, base_ts)
    raw = body if not codec else compress(codec, body)
    last = (records[-1].offset_delta if records else 0) if last_offset_delta is None else last_offset_delta
    attrs = (attributes & ~CODEC_MASK) | codec
    head = _HEADER.pack(base_offset, HEADER_BYTES - 12 + len(raw), -1, MAGIC, 0, attrs, last, base_ts, max_ts,
                        producer_id, producer_epoch, base_sequence, len(records))
    crc = crc32c.crc32c(head[_CRC_FROM:] + raw)
    return head[:17] + struct.pack(">I", crc) + head[_CRC_FROM:] + raw


_NULL = varint_bytes(-1)


def encode_records(records: Sequence[Record], base_ts: int) -> bytes:
    """The records of a batch, their timestamps as deltas to ``base_ts``: by the compiled
    kernel where it is built (a Fetch encodes one record per message it serves), else
    `encode_records_py`."""
    body = _records_kernel(records, base_ts)
    return encode_records_py(records, base_ts) if body is None else body


def no_records(records: Sequence[Record], base_ts: int) -> bytes | None:
    """The reference of the compiled ``encode_records``, which writes what it can write exactly
    as `encode_records_py` does: this one leaves everything to `encode_records_py`."""
    return None


def encode_records_py(records: Sequence[Record], base_ts: int) -> bytes:
    return b"".join([_encode_record(rec, base_ts) for rec in records])


_records_kernel = kernels.select("encode_records", no_records, "skiff.protocol.kafka._records")


def _encode_record(rec: Record, base_ts: int) -> bytes:
    offset_delta, timestamp, key, value, headers = rec
    parts = [b"\x00", varint_bytes(timestamp - base_ts), varint_bytes(offset_delta)]
    if key is None:
        parts.append(_NULL)
    else:
        parts += (varint_bytes(len(key)), key)
    if value is None:
        parts.append(_NULL)
    else:
        parts += (varint_bytes(len(value)), value)
    parts.append(varint_bytes(len(headers)))
    for name, hv in headers:
        raw = name.encode("utf-8")
        parts += (varint_bytes(len(raw)), raw)
        if hv is None:
            parts.append(_NULL)
        else:
            parts += (varint_bytes(len(hv)), hv)
    body = b"".join(parts)
    return varint_bytes(len(body)) + body


def decompress(codec: int, data: bytes) -> bytes:
    try:
        if codec == 1:
            out = bytes(cramjam.gzip.decompress(data))
        elif codec == 2:
            out = _snappy(data)
        elif codec == 3:
            out = bytes(cramjam.lz4.decompress(data))
        elif codec == 4:
            out = bytes(cramjam.zstd.decompress(data))
        else:
            raise DecodeError(f"unknown compression codec {codec} (Kafka's are 1 gzip, 2 snappy, 3 lz4, 4 zstd)")
    except cramjam.DecompressionError as exc:
        raise DecodeError(f"the {CODECS[codec]} records do not decompress: {exc}") from None
    if len(out) > KAFKA_BATCH_INFLATED_MAX_BYTES:
        raise DecodeError(f"a batch inflates to {len(out)} bytes, over {KAFKA_BATCH_INFLATED_MAX_BYTES}")
    return out


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    r = Reader(data, len(_XERIAL_MAGIC) + 8)  # magic, version, compatible version
    out = bytearray()
    while r.remaining:
        out += cramjam.snappy.decompress_raw(r.take(r.int32()))
        if len(out) > KAFKA_BATCH_INFLATED_MAX_BYTES:
            break
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as Kafka clients write it (snappy raw, as librdkafka does)."""
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")
