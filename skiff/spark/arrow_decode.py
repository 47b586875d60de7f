"""Stored records straight into the source's Arrow columns, with no Python object per message.

The read path before this built a `StoredMessage` per record and Arrow columns
from their attributes, at about 5 µs a message. Here a run of records (pull
answers joined) is indexed once (`skiff.spark.record_columns`), and each
column is made from the buffer in a few numpy or Arrow compute calls:

- bodies and raw properties are Arrow *binary views* over the pull buffer
  (length, prefix, buffer, offset per row, built with numpy), cast to plain
  binary or string in C++; compressed bodies are inflated one by one (they are
  the large ones, zlib dominates) and viewed in a second buffer;
- properties are split on their separators by Arrow's ``split_pattern`` into
  (row, name, value) pairs; KEYS, TAGS and UNIQ_KEY are taken out as columns and
  the rest, less the hidden ones, make the map. When a properties string is not
  UTF-8 or repeats a name in one message, that batch's pairs come from
  `decode_properties` instead, which replaces bad bytes and lets the last value
  of a name win, so both paths give the same map;
- the offset message id (store host + CommitLog offset in upper-case hex, used
  when a message has no UNIQ_KEY) through a byte-to-hex table.

The result equals what `decode_records` gives message by message (a property
test checks it on generated records): the same bodies, properties, ids and
timestamps, in record order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiff.common.compression import inflate
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.message import MessageQueue
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties
from skiff.spark.record_columns import PHYSICAL_AT, FixedFields, bytes_at, fixed_fields, record_starts
from skiff.spark.schema import ARROW_SCHEMA, HIDDEN_PROPERTIES, TIMESTAMP

_INLINE = 12
"""A binary view holds at most this many bytes inline (Arrow's format)."""
_HEX = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), np.uint8).reshape(256, 2)
_HIDDEN = pa.array(sorted(HIDDEN_PROPERTIES), pa.string())
_US_PER_MS = 1000
_PROPERTIES_TYPE = ARROW_SCHEMA.field("properties").type


def decode_run(buf: bytes, starts: np.ndarray | None, mq: MessageQueue, include_properties: bool = True,
               recheck_tags: frozenset[str] | None = None,
               max_body_bytes: int = FRAME_MAX_BYTES) -> pa.RecordBatch:
    """The source's record batch of the records of ``buf`` pulled from ``mq``: those starting
    at ``starts`` (None: every record of ``buf``), keeping only TAGS in ``recheck_tags`` if given."""
    starts = record_starts(buf) if starts is None else starts
    f = fixed_fields(buf, starts)
    n = len(starts)
    u8 = np.frombuffer(buf, np.uint8)
    rows, names, values = _pairs(_views(u8, f.props_at, f.props_len, buf))
    keys, tags, uniq = (_column(rows, names, values, n, name) for name in (Prop.KEYS, Prop.TAGS, Prop.UNIQ_KEY))
    no_uniq = np.flatnonzero(pc.fill_null(pc.equal(pc.binary_length(uniq), 0), True).to_numpy(zero_copy_only=False))
    columns = [
        pa.array([mq.topic] * n, pa.string()),
        pa.array([mq.broker_name] * n, pa.string()),
        pa.array(np.full(n, mq.queue_id, np.int32)),
        pa.array(f.queue_offset, pa.int64()),
        _patched(uniq, no_uniq, _offset_msg_ids(u8, f, no_uniq)) if len(no_uniq) else uniq,
        keys,
        tags,
        _bodies(u8, buf, f, max_body_bytes),
        _map(rows, names, values, n) if include_properties else pa.nulls(n, _PROPERTIES_TYPE),
        pa.array(f.born_timestamp * _US_PER_MS, TIMESTAMP),
        pa.array(f.store_timestamp * _US_PER_MS, TIMESTAMP),
        pa.array(f.reconsume_times.astype(np.int32)),
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    if recheck_tags is not None:
        batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=pa.array(sorted(recheck_tags), pa.string())),
                                          False))
    return batch


def _views(u8: np.ndarray, at: np.ndarray, length: np.ndarray, data: bytes) -> pa.Array:
    """A binary view array of the ``length`` bytes at each ``at`` of ``data`` (``u8`` is its bytes):
    no byte is copied but the few inline ones; a cast then gathers them in C++."""
    n = len(at)
    views = np.zeros((n, 4), np.int32)
    views[:, 0] = length
    short = length <= _INLINE
    if short.any():  # short ones hold their bytes inline, zero-padded
        inline = bytes_at(u8, at[short], _INLINE)
        inline[np.arange(_INLINE) >= length[short][:, None]] = 0
        views.view(np.uint8).reshape(n, 16)[short, 4:] = inline
    long = ~short  # a 4-byte prefix, buffer 0 and the offset
    views[long, 1] = bytes_at(u8, at[long], 4).view(np.int32).ravel()
    views[long, 3] = at[long]
    return pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(data)])


def _bodies(u8: np.ndarray, buf: bytes, f: FixedFields, max_body_bytes: int) -> pa.Array:
    """The body column: views into the pull buffer, compressed bodies inflated into a buffer of their own."""
    compressed = np.flatnonzero(f.compressed)
    plain = _views(u8, f.body_at, f.body_len, buf).cast(pa.binary())
    if not len(compressed):
        return plain
    inflated = [inflate(buf[a:a + n], max_body_bytes)
                for a, n in zip(f.body_at[compressed].tolist(), f.body_len[compressed].tolist())]
    lengths = np.array([len(b) for b in inflated], np.int64)
    joined = b"".join(inflated)
    at = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    own = np.frombuffer(joined, np.uint8)
    return _patched(plain, compressed, _views(own, at, lengths, joined).cast(pa.binary()))


def _patched(base: pa.Array, rows: np.ndarray, replacement: pa.Array) -> pa.Array:
    """``base`` with its ``rows`` replaced by ``replacement``'s values, in order."""
    order = np.arange(len(base), dtype=np.int64)
    order[rows] = len(base) + np.arange(len(rows))
    return pa.concat_arrays([base, replacement]).take(pa.array(order))


def _pairs(raw: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """Every message's well-formed property pairs in order: (row, name, value), as `decode_properties`
    finds them (names unique per message, the last value winning)."""
    try:
        text = raw.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: decode_properties replaces the bad bytes
        return _pairs_py(raw)
    items = pc.split_pattern(text, PROPERTY_SEPARATOR)
    parent = pc.list_parent_indices(items)
    parts = pc.split_pattern(pc.list_flatten(items), NAME_VALUE_SEPARATOR)
    first = pc.list_element(parts, 0)
    ok = pc.and_(pc.equal(pc.list_value_length(parts), 2), pc.not_equal(first, ""))
    names = first.filter(ok)
    values = pc.list_element(parts.filter(ok), 1)
    rows = parent.filter(ok).to_numpy(zero_copy_only=False).astype(np.int64)
    if _repeats_a_name(rows, names):
        return _pairs_py(raw)  # a name repeated within a message: the dict's rules decide
    return rows, names, values


def _repeats_a_name(rows: np.ndarray, names: pa.Array) -> bool:
    """Whether a row holds a name twice: (row, name code) pairs counted with one bincount."""
    if not len(names):
        return False
    codes = pc.dictionary_encode(names).indices.to_numpy(zero_copy_only=False).astype(np.int64)
    distinct = int(codes.max()) + 1
    keys = rows * distinct + codes
    if int(keys.max()) < 4 * len(keys) + 65536:  # few names: a bincount as long as (rows x names)
        return bool((np.bincount(keys) > 1).any())
    return len(np.unique(keys)) != len(keys)


def _pairs_py(raw: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """`_pairs` by `decode_properties`, message by message (rare inputs only)."""
    rows: list[int] = []
    names: list[str] = []
    values: list[str] = []
    for i, props in enumerate(raw.cast(pa.binary()).to_pylist()):
        for name, value in decode_properties(props).items():
            rows.append(i)
            names.append(name)
            values.append(value)
    return np.array(rows, np.int64), pa.array(names, pa.string()), pa.array(values, pa.string())


def _column(rows: np.ndarray, names: pa.Array, values: pa.Array, n: int, name: str) -> pa.Array:
    """Each message's value of property ``name``, null where it has none."""
    hits = np.flatnonzero(pc.equal(names, name).to_numpy(zero_copy_only=False))
    where = np.full(n, -1, np.int64)
    where[rows[hits]] = hits
    return values.take(pa.array(where, mask=where < 0))


def _map(rows: np.ndarray, names: pa.Array, values: pa.Array, n: int) -> pa.Array:
    """The properties map: every pair but the hidden ones, in the message's order."""
    shown = pc.invert(pc.is_in(names, value_set=_HIDDEN))
    kept = rows[shown.to_numpy(zero_copy_only=False)]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(kept, minlength=n), out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), names.filter(shown), values.filter(shown))


def _offset_msg_ids(u8: np.ndarray, f: FixedFields, rows: np.ndarray) -> pa.Array:
    """The broker's offset message ids of ``rows``: hex of the store host's bytes and the CommitLog offset."""
    n = len(rows)
    host_at, host_len, physical_at = f.store_host_at[rows], f.store_host_len[rows], f.start[rows] + PHYSICAL_AT
    if n and (host_len != host_len[0]).any():  # IPv4 and IPv6 store hosts in one run: row by row
        return pa.array([(bytes(u8[a:a + w]) + bytes(u8[p:p + 8])).hex().upper()
                         for a, w, p in zip(host_at.tolist(), host_len.tolist(), physical_at.tolist())], pa.string())
    width = int(host_len[0]) + 8 if n else 16
    raw = np.concatenate((bytes_at(u8, host_at, width - 8), bytes_at(u8, physical_at, 8)), axis=1)
    offsets = np.arange(n + 1, dtype=np.int32) * (2 * width)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(_HEX[raw])])
