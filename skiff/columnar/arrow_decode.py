"""Stored records straight into the source's Arrow columns, with no Python object per message.

The read path before this built a `StoredMessage` per record and Arrow columns
from their attributes, at about 5 µs a message. Here the columns that depend on
the records come from `run_columns` as plain buffers (offsets and bytes), which
`decode_run` wraps into Arrow arrays without a copy. `run_columns` is a
compiled kernel (`skiff.columnar._kernels`) where that is built: one pass over the records
(0.16 µs a 1 KiB message). Its reference `run_columns_py` does the same in a
few numpy or Arrow compute calls (about 1 µs a message):

- bodies and raw properties are Arrow *binary views* over the pull buffer
  (length, prefix, buffer, offset per row, built with numpy), cast to plain
  binary or string in C++; compressed bodies are inflated one by one (they are
  the large ones, zlib dominates) and viewed in a second buffer;
- properties are split on their separators by Arrow's ``split_pattern`` into
  (row, name, value) pairs; KEYS, TAGS and UNIQ_KEY are taken out as columns and
  the rest, less the hidden ones, make the map. When a properties string is not
  UTF-8 or repeats a name in one message, that batch's pairs come from
  `decode_properties` instead, which replaces bad bytes and lets the last value
  of a name win, so both paths give the same map (the kernel calls it for such
  a message, and for one of more than 32 pairs);
- the offset message id (store host + CommitLog offset in upper-case hex, used
  when a message has no UNIQ_KEY) through a byte-to-hex table.

The result equals what `decode_records` gives message by message (a property
test checks it on generated records, a twin test the kernel against its
reference): the same bodies, properties, ids and timestamps, in record order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skiff.common import kernels
from skiff.common.compression import inflate
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.message import MessageQueue
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop, decode_properties
from skiff.common.record import PHYSICAL_OFFSET_AT
from skiff.columnar.record_columns import (
    HEX_PAIRS,
    FixedFields,
    bytes_at,
    fixed_fields,
    raise_decode_error,
    record_starts,
)
from skiff.columnar.schema import ARROW_SCHEMA, HIDDEN_PROPERTIES, TIMESTAMP

_INLINE = 12
"""A binary view holds at most this many bytes inline (Arrow's format)."""
_HIDDEN = pa.array(sorted(HIDDEN_PROPERTIES), pa.string())
_US_PER_MS = 1000
_PROPERTIES_TYPE = ARROW_SCHEMA.field("properties").type
# Scalars made once: pyarrow converts a Python value on every compute call that gets one,
# and each conversion tries (and fails) to import dateutil, ~0.1 ms a call
_EMPTY = pa.scalar("", pa.string())
_ZERO = pa.scalar(0, pa.int32())
_ONE = pa.scalar(1, pa.int32())
_PAIR_PARTS = pa.scalar(2, pa.int32())
_NAME = {name: pa.scalar(name, pa.string()) for name in (Prop.KEYS, Prop.TAGS, Prop.UNIQ_KEY)}


Var = tuple[np.ndarray, Any]
"""A string or binary column as plain buffers: its offsets (int32, from 0) and the bytes they index."""


class RunColumns(NamedTuple):
    """The columns of a run of records that depend on the records, as plain buffers."""

    fixed: np.ndarray
    """(4, n) int64: queue offset, born and store timestamps (ms), reconsume times."""
    body: Var
    msg_id: Var
    keys: tuple[np.ndarray, Any, np.ndarray]
    """Offsets, bytes and where a value is set (bool): null rows have no bytes."""
    tags: tuple[np.ndarray, Any, np.ndarray]
    properties: tuple[np.ndarray, Var, Var] | None
    """The map's entry offsets (int32), its names and its values; None without properties."""


def decode_run(buf: bytes, starts: np.ndarray | None, mq: MessageQueue, include_properties: bool = True,
               recheck_tags: frozenset[str] | None = None,
               max_body_bytes: int = FRAME_MAX_BYTES) -> pa.RecordBatch:
    """The source's record batch of the records of ``buf`` pulled from ``mq``: those starting
    at ``starts`` (None: every record of ``buf``), keeping only TAGS in ``recheck_tags`` if given."""
    starts = record_starts(buf) if starts is None else starts
    raw = run_columns(buf, starts, include_properties, max_body_bytes, inflate, decode_properties)
    if raw is None:
        raise_decode_error(buf)
    c = RunColumns(*raw)
    n = len(starts)
    tags = _array(pa.string(), n, *c.tags)
    columns = [
        _repeated(mq.topic, n),
        _repeated(mq.broker_name, n),
        pa.array(np.full(n, mq.queue_id, np.int32)),
        pa.array(c.fixed[0], pa.int64()),
        _array(pa.string(), n, *c.msg_id),
        _array(pa.string(), n, *c.keys),
        tags,
        _array(pa.binary(), n, *c.body),
        _map_array(c.properties) if c.properties is not None else pa.nulls(n, _PROPERTIES_TYPE),
        pa.array(c.fixed[1] * _US_PER_MS, TIMESTAMP),
        pa.array(c.fixed[2] * _US_PER_MS, TIMESTAMP),
        pa.array(c.fixed[3].astype(np.int32)),
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    if recheck_tags is not None:
        batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=pa.array(sorted(recheck_tags), pa.string())),
                                          False))
    return batch


def _array(kind: pa.DataType, n: int, offsets: np.ndarray, data: Any, valid: np.ndarray | None = None) -> pa.Array:
    """A string or binary array over plain buffers (no copy), null where ``valid`` is False."""
    nulls = 0 if valid is None else n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls and valid is not None else None
    buffer = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(offsets), buffer], null_count=nulls)


def _map_array(properties: tuple[np.ndarray, Var, Var]) -> pa.Array:
    offsets, names, values = properties
    entries = len(offsets) and int(offsets[-1])
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), _array(pa.string(), entries, *names),
                                   _array(pa.string(), entries, *values))


def run_columns_py(buf: bytes, starts: np.ndarray, include_properties: bool, max_body_bytes: int,
                   inflate: Callable[[bytes, int], bytes],
                   decode_properties: Callable[[bytes], dict[str, str]]) -> RunColumns | None:
    """The reference of the compiled `run_columns` (`skiff.columnar._kernels`), column-wise with numpy
    and Arrow compute; None when a record does not hold together."""
    f = fixed_fields(buf, starts)
    if f is None:
        return None
    n = len(starts)
    u8 = np.frombuffer(buf, np.uint8)
    rows, names, values = _pairs(_views(u8, f.props_at, f.props_len, buf), decode_properties)
    keys, tags, uniq = (_column(rows, names, values, n, name) for name in (Prop.KEYS, Prop.TAGS, Prop.UNIQ_KEY))
    no_uniq = np.flatnonzero(pc.fill_null(pc.equal(pc.binary_length(uniq), _ZERO), True).to_numpy(
        zero_copy_only=False))
    msg_id = _patched(uniq, no_uniq, _offset_msg_ids(u8, f, no_uniq)) if len(no_uniq) else uniq
    properties = None
    if include_properties:
        offsets, shown_names, shown_values = _map(rows, names, values, n)
        properties = (offsets, _var(shown_names), _var(shown_values))
    fixed = np.stack([f.queue_offset, f.born_timestamp, f.store_timestamp, f.reconsume_times])
    return RunColumns(fixed, _var(_bodies(u8, buf, f, max_body_bytes, inflate)), _var(msg_id), _nullable(keys),
                      _nullable(tags), properties)


run_columns = kernels.select("run_columns", run_columns_py, "skiff.columnar._kernels")


def _var(values: pa.Array) -> Var:
    """A string or binary array without nulls as (offsets from 0, its bytes), no copy."""
    offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1, values.offset * 4)
    data = values.buffers()[2]
    first, last = int(offsets[0]), int(offsets[-1])
    return offsets - offsets[0], data[first:last] if data is not None else b""


def _nullable(values: pa.Array) -> tuple[np.ndarray, Any, np.ndarray]:
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return (*_var(pc.fill_null(values, _EMPTY)), valid)


def _repeated(text: str, n: int) -> pa.Array:
    """``n`` times ``text`` as a string column, built from buffers (no Python list of n items)."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


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


def binary_spans(u8: np.ndarray, data: bytes, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """The binary column of the ``length`` bytes at each ``at`` of ``data`` (``u8`` is its bytes),
    gathered in C++ from views, with no Python object per row."""
    return _views(u8, at, length, data).cast(pa.binary())


def _bodies(u8: np.ndarray, buf: bytes, f: FixedFields, max_body_bytes: int,
            inflate: Callable[[bytes, int], bytes]) -> pa.Array:
    """The body column: views into the pull buffer, compressed bodies inflated into a buffer of their own."""
    compressed = np.flatnonzero(f.compressed)
    plain = binary_spans(u8, buf, f.body_at, f.body_len)
    if not len(compressed):
        return plain
    inflated = [inflate(buf[a:a + n], max_body_bytes)
                for a, n in zip(f.body_at[compressed].tolist(), f.body_len[compressed].tolist())]
    lengths = np.array([len(b) for b in inflated], np.int64)
    joined = b"".join(inflated)
    at = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    own = np.frombuffer(joined, np.uint8)
    return _patched(plain, compressed, binary_spans(own, joined, at, lengths))


def _patched(base: pa.Array, rows: np.ndarray, replacement: pa.Array) -> pa.Array:
    """``base`` with its ``rows`` replaced by ``replacement``'s values, in order."""
    order = np.arange(len(base), dtype=np.int64)
    order[rows] = len(base) + np.arange(len(rows))
    return pa.concat_arrays([base, replacement]).take(pa.array(order))


def _pairs(raw: pa.Array, decode_properties: Callable[[bytes], dict[str, str]]
           ) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """Every message's well-formed property pairs in order: (row, name, value), as `decode_properties`
    finds them (names unique per message, the last value winning)."""
    try:
        text = raw.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: decode_properties replaces the bad bytes
        return _pairs_py(raw, decode_properties)
    items = pc.split_pattern(text, PROPERTY_SEPARATOR)
    parent = pc.list_parent_indices(items)
    parts = pc.split_pattern(pc.list_flatten(items), NAME_VALUE_SEPARATOR)
    first = pc.list_element(parts, _ZERO)
    ok = pc.and_(pc.equal(pc.list_value_length(parts), _PAIR_PARTS), pc.not_equal(first, _EMPTY))
    names = first.filter(ok)
    values = pc.list_element(parts.filter(ok), _ONE)
    rows = parent.filter(ok).to_numpy(zero_copy_only=False).astype(np.int64)
    if _repeats_a_name(rows, names):
        return _pairs_py(raw, decode_properties)  # a name repeated within a message: the dict's rules decide
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


def _pairs_py(raw: pa.Array, decode_properties: Callable[[bytes], dict[str, str]]
              ) -> tuple[np.ndarray, pa.Array, pa.Array]:
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
    hits = np.flatnonzero(pc.equal(names, _NAME[name]).to_numpy(zero_copy_only=False))
    where = np.full(n, -1, np.int64)
    where[rows[hits]] = hits
    return values.take(pa.array(where, mask=where < 0))


def _map(rows: np.ndarray, names: pa.Array, values: pa.Array, n: int) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """The properties map's entry offsets, names and values: every pair but the hidden ones,
    in the message's order."""
    shown = pc.invert(pc.is_in(names, value_set=_HIDDEN))
    kept = rows[shown.to_numpy(zero_copy_only=False)]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(kept, minlength=n), out=offsets[1:])
    return offsets, names.filter(shown), values.filter(shown)


def _offset_msg_ids(u8: np.ndarray, f: FixedFields, rows: np.ndarray) -> pa.Array:
    """The broker's offset message ids of ``rows``: hex of the store host's bytes and the CommitLog offset."""
    n = len(rows)
    host_at, host_len, physical_at = f.store_host_at[rows], f.store_host_len[rows], f.start[rows] + PHYSICAL_OFFSET_AT
    if n and (host_len != host_len[0]).any():  # IPv4 and IPv6 store hosts in one run: row by row
        return pa.array([(bytes(u8[a:a + w]) + bytes(u8[p:p + 8])).hex().upper()
                         for a, w, p in zip(host_at.tolist(), host_len.tolist(), physical_at.tolist())], pa.string())
    width = int(host_len[0]) + 8 if n else 16
    raw = np.concatenate((bytes_at(u8, host_at, width - 8), bytes_at(u8, physical_at, 8)), axis=1)
    offsets = np.arange(n + 1, dtype=np.int32) * (2 * width)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(HEX_PAIRS[raw])])
