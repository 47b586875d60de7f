"""Arrow batches of the sink straight into SEND_BATCH_MESSAGE bodies, column by column.

A batch body is one record per message (`skiff.protocol.message_codec`): a
20-byte head (TOTALSIZE, magic 0, CRC 0, flag 0, body length), the body, a
2-byte properties length and the properties string. Here the properties string
of every row is joined by Arrow from its parts (the user's pairs, TAGS, KEYS,
the sharding key, WAIT=true and the UNIQ_KEY, the order `Message.of` and the
producer give them), the heads are a numpy array, and one element-wise binary
join lays the records out back to back: a run of rows bound for one queue is a
slice of that buffer. No `Message` is built per row.

Rows are checked as a whole, and the first bad row is named: an empty or null
body, a null topic with no ``topic`` option, a separator byte in a property, a
property the sink sets itself in the ``properties`` map, properties or a body
over the limits.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiff.columnar.record_columns import HEX_PAIRS
from skiff.common.limits import BATCH_MAX_MESSAGES, MESSAGE_MAX_BYTES, PROPERTIES_MAX_BYTES
from skiff.common.message import MessageQueue
from skiff.common.msgid import UNIQ_IDS
from skiff.common.properties import NAME_VALUE_SEPARATOR as NV
from skiff.common.properties import PROPERTY_SEPARATOR as SEP
from skiff.common.properties import Prop
from skiff.protocol.message_codec import BATCH_RECORD_FIXED_BYTES
from skiff.spark.errors import SparkOptionError
from skiff.spark.sink_rows import SinkColumns

RESERVED = {
    Prop.TAGS: "use the tags column", Prop.KEYS: "use the keys column", Prop.SHARDING_KEY: "use the shardingKey column",
    Prop.UNIQ_KEY: "the sink sets msg ids (idempotent=true makes them stable)", Prop.WAIT: "the sink sets it",
    **{name: "delayed messages cannot be sent in a batch" for name in (
        Prop.DELAY, Prop.DELIVER_TIME_MS, Prop.DELAY_MS, Prop.TIMER_DELIVER_MS, Prop.TIMER_DELAY_SEC,
        Prop.TIMER_DELAY_MS)},
}
"""Names the ``properties`` map may not hold, and why."""
_RESERVED_NAMES = pa.array(sorted(RESERVED), pa.string())
_FIXED = BATCH_RECORD_FIXED_BYTES
_HEAD = _FIXED - 2  # the 16-bit properties length follows the body
_WAIT_TRUE = f"{Prop.WAIT}{NV}true{SEP}"
# Scalars made once: pyarrow converts a Python value on every compute call that gets one (and
# each conversion tries to import dateutil, ~0.1 ms)
_EMPTY = pa.scalar("", pa.string())
_NO_BYTES = pa.scalar(b"", pa.binary())
_ZERO = pa.scalar(0, pa.int32())
_FALSE = pa.scalar(False)
_PROPERTIES_MAX = pa.scalar(PROPERTIES_MAX_BYTES, pa.int32())
_MESSAGE_MAX = pa.scalar(MESSAGE_MAX_BYTES, pa.int32())
_TEXTS: dict[str, pa.Scalar] = {}
_COUNTER_SPAN = 1 << 16
_UNIQ_KEY_CHARS = 32


def _text(value: str) -> pa.Scalar:
    scalar = _TEXTS.get(value)
    if scalar is None:
        scalar = _TEXTS[value] = pa.scalar(value, pa.string())
    return scalar


class Encoded(NamedTuple):
    """A batch's rows as records: ``records[i]`` is row i's batch record, ``msg_ids[i]`` its id."""

    records: pa.Array
    msg_ids: pa.Array
    topics: pa.Array


class Outgoing(NamedTuple):
    """One SEND_BATCH_MESSAGE: a batch body of one topic, for ``queue`` (None: the producer picks)."""

    topic: str
    queue: MessageQueue | None
    body: bytes
    msg_ids: list[str]


def uniq_ids(n: int) -> pa.Array:
    """``n`` new UNIQ_KEY msg ids (`skiff.common.msgid.UNIQ_IDS`) as a string column, formatted
    with numpy: no Python string per row. An id's counter is 16 bits within its millisecond, so
    more than 65,536 ids are made over more than one millisecond (waiting for the next one)."""
    pieces: list[np.ndarray] = []
    last = None
    for lo in range(0, n, _COUNTER_SPAN):
        prefix, counters = UNIQ_IDS.take(min(_COUNTER_SPAN, n - lo))
        while prefix == last:  # the same millisecond as the last piece: its counters would repeat
            time.sleep(0.0005)
            prefix, counters = UNIQ_IDS.take(len(counters))
        last = prefix
        low = np.array(counters, np.int64) & 0xFFFF
        raw = np.empty((len(low), len(prefix) + 4), np.uint8)
        raw[:, :len(prefix)] = np.frombuffer(prefix.encode(), np.uint8)
        raw[:, len(prefix):len(prefix) + 2] = HEX_PAIRS[low >> 8]
        raw[:, len(prefix) + 2:] = HEX_PAIRS[low & 0xFF]
        pieces.append(raw.ravel())
    data = np.concatenate(pieces) if pieces else np.zeros(0, np.uint8)
    offsets = np.arange(n + 1, dtype=np.int32) * _UNIQ_KEY_CHARS
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def encode(batch: pa.RecordBatch, columns: SinkColumns, default_topic: str | None,
           msg_ids: Sequence[str] | pa.Array, first_row: int) -> Encoded:
    """The batch records of ``batch``'s rows (row numbers in errors count from ``first_row``)."""
    n = batch.num_rows
    ids = msg_ids if isinstance(msg_ids, pa.Array) else pa.array(list(msg_ids), pa.string())
    body = _column(batch, columns, "body", pa.binary())
    body_len = pc.binary_length(body)
    _fail_at(pc.invert(pc.fill_null(pc.greater(body_len, _ZERO), False)), first_row,
             "has an empty or null body; brokers store no empty messages")
    topics = _column(batch, columns, "topic", pa.string())
    if default_topic is not None:
        topics = pc.fill_null(topics, pa.scalar(default_topic, pa.string()))
    _fail_at(pc.is_null(topics), first_row, "has a null topic and no topic option is set")
    tags, keys, shard = (_column(batch, columns, key, pa.string()) for key in ("tags", "keys", "shardingkey"))
    for values in (tags, keys, shard):
        _fail_at(_has_separator(values), first_row, "has a 0x01 or 0x02 separator byte in a property")
    props = pc.binary_join_element_wise(
        _user_pairs(batch, columns, first_row), _pair(Prop.TAGS, tags, True), _pair(Prop.KEYS, keys, True),
        _pair(Prop.SHARDING_KEY, shard, False), _text(_WAIT_TRUE),
        _pair(Prop.UNIQ_KEY, ids, False), _EMPTY).cast(pa.binary())
    _fail_at(pc.greater(pc.binary_length(props), _PROPERTIES_MAX), first_row,
             f"has properties of more than {PROPERTIES_MAX_BYTES} bytes")
    _fail_at(pc.greater(body_len, _MESSAGE_MAX), first_row, f"has a body of more than {MESSAGE_MAX_BYTES} bytes")
    head = np.zeros((n, 5), ">i4")
    blen = body_len.to_numpy(zero_copy_only=False).astype(np.int64)
    plen = pc.binary_length(props).to_numpy(zero_copy_only=False).astype(np.int64)
    head[:, 0] = _FIXED + blen + plen
    head[:, 4] = blen
    records = pc.binary_join_element_wise(_fixed(head.tobytes(), _HEAD, n), body,
                                          _fixed(plen.astype(">i2").tobytes(), 2, n), props, _NO_BYTES)
    return Encoded(records, ids, topics)


def _column(batch: pa.RecordBatch, columns: SinkColumns, key: str, kind: pa.DataType) -> pa.Array:
    name = columns.names.get(key)
    if name is None:
        return pa.nulls(batch.num_rows, kind)
    return batch.column(name).cast(kind)


def _pair(name: str, values: pa.Array, only_if_set: bool) -> pa.Array:
    """``name 0x01 value 0x02`` where a row has a value (``only_if_set``: a non-empty one), else ``""``."""
    text = pc.binary_join_element_wise(_text(name + NV), values, _text(SEP), _EMPTY)
    if only_if_set:
        text = pc.if_else(pc.fill_null(pc.greater(pc.binary_length(values), _ZERO), False), text, _EMPTY)
    return pc.fill_null(text, _EMPTY)


def _user_pairs(batch: pa.RecordBatch, columns: SinkColumns, first_row: int) -> pa.Array:
    """Each row's ``properties`` map as its pairs' text (a null map or value: nothing, an empty value)."""
    name = columns.names.get("properties")
    if name is None:
        return pa.nulls(batch.num_rows, pa.string()).fill_null(_EMPTY)
    maps = batch.column(name)
    offsets = np.asarray(maps.offsets).astype(np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    keys = maps.keys.slice(first, last - first) if len(maps.keys) != last - first else maps.keys
    values = pc.fill_null(maps.items.slice(first, last - first) if len(maps.items) != last - first else maps.items,
                          _EMPTY)
    parent = np.repeat(np.arange(len(maps)), np.diff(offsets))
    bad = pc.or_(pc.or_(pc.is_in(keys, value_set=_RESERVED_NAMES), pc.equal(keys, _EMPTY)),
                 pc.or_(_has_separator(keys), _has_separator(values))).to_numpy(zero_copy_only=False)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        key = keys[at].as_py()
        why = RESERVED.get(key, "a property needs a name" if not key else "a 0x01 or 0x02 separator byte is not "
                                "allowed in a property name or value")
        raise SparkOptionError(f"row {first_row + int(parent[at])} of this partition has the property {key!r} in "
                               f"its properties column: {why}")
    pairs = pc.binary_join_element_wise(keys, _text(NV), values, _text(SEP), _EMPTY)
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array((offsets - first).astype(np.int32)), pairs), _EMPTY)
    return pc.fill_null(pc.if_else(maps.is_null(), _EMPTY, joined), _EMPTY)


def _has_separator(values: pa.Array) -> pa.Array:
    return pc.fill_null(pc.or_(pc.match_substring(values, NV), pc.match_substring(values, SEP)), _FALSE)


def _fail_at(bad: pa.Array, first_row: int, what: str) -> None:
    hits = np.flatnonzero(pc.fill_null(bad, True).to_numpy(zero_copy_only=False))
    if len(hits):
        raise SparkOptionError(f"row {first_row + int(hits[0])} of this partition {what}")


def _fixed(data: bytes, width: int, n: int) -> pa.Array:
    """``n`` values of ``width`` bytes each, back to back in ``data``, as a binary array."""
    return pa.Array.from_buffers(pa.binary(width), n, [None, pa.py_buffer(data)]).cast(pa.binary())


def chunks(encoded: Encoded, rows: np.ndarray, topic: str, queue: MessageQueue | None,
           max_rows: int = BATCH_MAX_MESSAGES, max_bytes: int = MESSAGE_MAX_BYTES) -> list[Outgoing]:
    """The sends of ``rows`` (in order, all of ``topic``): at most ``max_rows`` messages and
    ``max_bytes`` of body each."""
    everything = len(rows) == len(encoded.records)
    records = encoded.records if everything else encoded.records.take(pa.array(rows))
    ids = encoded.msg_ids if everything else encoded.msg_ids.take(pa.array(rows))
    _, offset_buffer, data = records.buffers()
    offsets = np.frombuffer(offset_buffer, np.int32)[records.offset:records.offset + len(records) + 1].astype(np.int64)
    out: list[Outgoing] = []
    lo, n = 0, len(rows)
    while lo < n:
        hi = int(np.searchsorted(offsets, offsets[lo] + max_bytes, side="right")) - 1
        hi = max(min(hi, lo + max_rows, n), lo + 1)
        body = data[int(offsets[lo]):int(offsets[hi])].to_pybytes()
        out.append(Outgoing(topic, queue, body, ids.slice(lo, hi - lo).to_pylist()))
        lo = hi
    return out


K = TypeVar("K", bound=Hashable)


def by_value(values: Sequence[K]) -> dict[K, np.ndarray]:
    """The row numbers of each distinct value, in row order (values in first-seen order)."""
    groups: dict[K, list[int]] = {}
    for i, value in enumerate(values):
        groups.setdefault(value, []).append(i)
    return {value: np.array(rows, np.int64) for value, rows in groups.items()}
