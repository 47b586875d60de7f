"""A Fetch's record batch v2, made from the stored records a pull read (RocketMQ's CommitLog
layout, `skiff.common.record`): the stored bytes in, the batch's bytes out.

A Fetch serves one uncompressed batch per partition, one record per stored message, its
offset delta the message's queue offset less the first's (so a compacted range's removed
offsets are gaps), its timestamp the born time. A message without properties — a keyless
Kafka record without headers, what Kafka producers mostly send — is a record with a null
key, the body as value and no headers; a message with properties is made a record by the
caller's mapping (``record_of``: the broker's, `skiff.broker.kafka.mapping.raw_record`, which
knows what the properties mean). The byte limits: records are served while they fit in
``max_bytes``; the first partition of a Fetch (``first``) gets at least one record even past
it (KIP-74), a later one gets none rather than part of a batch.

`stored_batch` is the compiled kernel where it is built (`_records.pyx`: one pass from the
stored bytes to the batch bytes, no Python object per message without properties, which a
Python loop costs more than twice the rest of a Fetch per message: docs/performance.md);
`stored_batch_py` is its reference, and the kernel declines (None) whatever it would not
make exactly as the reference does: a record that fails the layout checks, a compressed
body, a mapped value of another type or past its field's width.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import crc32c

from skiff.common import kernels
from skiff.common.compression import inflate
from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.stored_message import StoredMessage, decode_run
from skiff.protocol.kafka.records import Record, encode_batch

RECORD_OVERHEAD = 24
"""Bytes a record takes beyond its key, value and headers (varints), for the size limits."""

RecordOf = Callable[[int, int, bytes, bytes], Record]
"""A stored message with properties as a Kafka record: (offset delta, born time, body, the raw
properties string) → `Record`."""

_BODY = StoredMessage._fields.index("body")
_OFFSET = StoredMessage._fields.index("queue_offset")
_BORN = StoredMessage._fields.index("born_timestamp")
"""Where `decode_run`'s plain tuples hold a record's fields: `StoredMessage`'s order, then the
record's whereabouts, its properties string from the second last (``props_at``) to the last."""


def stored_batch(data: bytes | memoryview, max_bytes: int, first: bool, record_of: RecordOf) -> tuple[int, bytes]:
    """The batch of the stored records ``data`` (a pull answer, at least one record) that fit in
    ``max_bytes``, and its base offset (the first record's queue offset); ``b""`` when none is
    served (a later partition whose first record does not fit, or no records). `DecodeError`
    when a stored record does not decode. ``data`` may be a view of a buffer the caller reuses:
    nothing returned refers to it."""
    out = _stored_batch(data, max_bytes, first, record_of, crc32c.crc32c)
    return stored_batch_py(bytes(data), max_bytes, first, record_of) if out is None else out


def no_stored_batch(data: bytes | memoryview, max_bytes: int, first: bool, record_of: RecordOf,
                    crc: Callable[[Any], int]) -> tuple[int, bytes] | None:
    """The reference of the compiled ``stored_batch``, which makes what it can make exactly as
    `stored_batch_py` does: this one leaves everything to `stored_batch_py`."""
    return None


def stored_batch_py(data: bytes, max_bytes: int, first: bool, record_of: RecordOf) -> tuple[int, bytes]:
    """`stored_batch` in Python: the records of `stored_records`, encoded as one batch."""
    base, records = stored_records(data, max_bytes, first, record_of)
    return base, encode_batch(base, records) if records else b""


_stored_batch = kernels.select("stored_batch", no_stored_batch, "skiff.protocol.kafka._records")


def stored_records(data: bytes, max_bytes: int, first: bool, record_of: RecordOf) -> tuple[int, list[Record]]:
    """The Kafka records of the stored records ``data`` that fit in ``max_bytes`` and the first
    one's queue offset (`stored_batch`'s rules); each read from the stored bytes in one pass
    (body, born time, raw properties string), with no `StoredMessage` per message."""
    rows = _rows(data)
    if not rows:
        return 0, []
    base = rows[0][_OFFSET]
    records: list[Record] = []
    size = 0
    for row in rows:
        props_at, end = row[-2], row[-1]
        delta, born, body = row[_OFFSET] - base, row[_BORN], row[_BODY]
        rec = record_of(delta, born, body, data[props_at:end]) if props_at != end else Record(delta, born, None, body)
        rec_size = record_size(rec)
        if records and size + rec_size > max_bytes:
            break
        if not records and not first and rec_size > max_bytes:
            return base, []
        records.append(rec)
        size += rec_size
    return base, records


def _rows(data: bytes) -> list[tuple[Any, ...]]:
    """The stored records as plain tuples (`decode_run`'s layout), bodies inflated.
    `DecodeError` when a record fails the layout checks (as `decode_records` checks them)."""
    rows, bad = decode_run(data, tuple, data, inflate, FRAME_MAX_BYTES)
    if bad >= 0:
        raise DecodeError(f"the stored record at {bad} of a pull answer does not decode")
    return rows


def record_size(rec: Record) -> int:
    """What a record counts against a Fetch's byte limits (its header names in characters)."""
    size = RECORD_OVERHEAD + len(rec.key or b"") + len(rec.value or b"")
    return size + sum(len(k) + len(v or b"") + 4 for k, v in rec.headers) if rec.headers else size
