"""The columns of a tiered file, and the stored records they come from and go back to.

A tiered file is one queue's offset range as a Parquet table. Its first twelve
columns are exactly the Spark source's (``skiff.columnar.schema.SOURCE_FIELDS``, one
definition for both), so ``spark.read.parquet`` on a tier gives the rows a
``skiff`` read gives, and the Spark source hands the tier's row groups on as they
are. The columns after them keep what a stored record holds beyond those (user
flag, sysFlag, hosts, CommitLog offset, prepared transaction offset, the properties
as stored), so a broker rebuilds the record byte for byte from a row to serve a pull
of an offset that is no longer local (`rows_to_records`). Bodies are stored inflated:
a rebuilt record of a compressed message carries the inflated body and no COMPRESSED
bit, which every client reads the same.

``properties`` leaves out the properties that have a column (KEYS, TAGS, UNIQ_KEY),
the WAIT flag and the per-pull MIN/MAX_OFFSET, as the Spark source does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, Union, cast

import numpy as np
import pyarrow as pa

from skiff.columnar.arrow_decode import binary_spans, decode_run
from skiff.columnar.record_columns import record_starts
from skiff.columnar.record_fields import record_fields, span_texts
from skiff.columnar.schema import HIDDEN_PROPERTIES, SOURCE_FIELDS
from skiff.common import kernels
from skiff.common.message import MessageQueue
from skiff.common.properties import decode_properties
from skiff.common.record import pack_host, parse_host_port, record_size, unpack_host, write_record
from skiff.common.sysflag import MessageSysFlag

RECORD_FIELDS = [
    pa.field("flag", pa.int32()),
    pa.field("sys_flag", pa.int32()),
    pa.field("born_host", pa.string()),
    pa.field("store_host", pa.string()),
    pa.field("commit_log_offset", pa.int64()),
    pa.field("prepared_transaction_offset", pa.int64()),
    pa.field("raw_properties", pa.binary()),
]
"""What a record holds beyond the source's columns (to rebuild it for a pull)."""
TIER_SCHEMA = pa.schema(SOURCE_FIELDS + RECORD_FIELDS)

_US_PER_MS = 1000
Buffer = Union[bytes, pa.Buffer, memoryview]
"""A column's data as `rebuild_records` takes it."""
_NOT_COMPRESSED = ~int(MessageSysFlag.COMPRESSED)


def records_to_table(buf: bytes | memoryview, broker: str) -> pa.Table:
    """The tier rows of a run of stored records (one queue's, back to back, as a pull answer);
    the message decoder's `DecodeError` when a record does not hold together.

    Column-wise, with no Python object per message (a `StoredMessage` and a row tuple each
    cost about 20 ms of broker CPU per uploaded MB of 1 KiB messages): the source's columns
    are the Spark source's decoder's (`decode_run`), the record's other fields are read in
    one more pass (`record_fields`), both compiled where built, and hosts and topics are
    formatted once per distinct value (`span_texts`). The result equals a table built from
    `decode_records` message by message (tests/unit/tier/test_records_to_table.py).
    """
    data = bytes(buf)
    starts = record_starts(data)
    r = record_fields(data, starts)
    u8 = np.frombuffer(data, np.uint8)
    # decode_run repeats one queue's topic and id; the table takes both from each record
    source = decode_run(data, starts, MessageQueue("", broker, 0)).columns
    source[0] = span_texts(u8, r.topic_at, r.topic_len, _topic_text)
    source[2] = pa.array(r.queue_id.astype(np.int32))
    record = [
        pa.array(r.flag.astype(np.int32)),
        pa.array((r.sys_flag & _NOT_COMPRESSED).astype(np.int32)),
        span_texts(u8, r.born_host_at, r.born_host_len, unpack_host),
        span_texts(u8, r.store_host_at, r.store_host_len, unpack_host),
        pa.array(r.commit_log_offset, pa.int64()),
        pa.array(r.prepared_transaction_offset, pa.int64()),
        binary_spans(u8, data, r.props_at, r.props_len),
    ]
    return pa.Table.from_arrays(source + record, schema=TIER_SCHEMA)


def _topic_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")  # as the message decoder reads a topic


def rows_to_records(table: pa.Table) -> bytes:
    """Stored records rebuilt from tier rows, back to back (a pull answer's body)."""
    return rebuild(table).records


def rows_to_record_list(table: pa.Table) -> list[bytes]:
    """Each tier row's stored record, rebuilt."""
    rebuilt = rebuild(table)
    ends = rebuilt.ends.tolist()
    return [rebuilt.records[start:end] for start, end in zip([0] + ends[:-1], ends)]


class Rebuilt(NamedTuple):
    """Tier rows' stored records back to back, and where each ends."""

    records: bytes
    ends: np.ndarray


REBUILT_FIELDS = ("queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag", "born_timestamp",
                  "store_timestamp", "reconsume_times", "prepared_transaction_offset")
"""The rows of `rebuild_records`' ``fields``, in order (timestamps in ms there)."""
_SPANS = ("topic", "body", "raw_properties")
_record_sizes = cast(Callable[..., np.ndarray], record_size)
"""`record_size` of arrays (it is arithmetic on its arguments): one definition of the size."""
_TIMESTAMPS = frozenset({"born_timestamp", "store_timestamp"})


def rebuild(table: pa.Table) -> Rebuilt:
    """The stored records of tier rows, byte for byte the ones they were made from (but a
    compressed message's: inflated, without the COMPRESSED bit), written from the columns in one
    pass (`rebuild_records`, compiled where built): no Python object per row, and each distinct
    host (a run holds a few) parsed and packed once. ValueError for rows that are not a tiered
    file's (a null where a record has a value)."""
    nulls = [n for n in REBUILT_FIELDS + _SPANS + ("born_host", "store_host") if table.column(n).null_count]
    if nulls:
        raise ValueError(f"tier rows with nulls in {', '.join(nulls)}: not rows of a tiered file")
    fields = np.empty((len(REBUILT_FIELDS), table.num_rows), np.int64)
    for k, name in enumerate(REBUILT_FIELDS):
        fields[k] = _ints(table.column(name)) // _US_PER_MS if name in _TIMESTAMPS else _ints(table.column(name))
    (topics, topic_data), (bodies, body_data), (props, props_data) = (_spans(table.column(n)) for n in _SPANS)
    host_texts, (born_index, store_index) = _distinct(table.column("born_host"), table.column("store_host"))
    packed = [pack_host(*parse_host_port(h)) for h in host_texts]
    host_len = np.array([len(p) for p in packed], np.int64)
    hosts = np.concatenate(([0], np.cumsum(host_len))).astype(np.int64)
    sizes = np.asarray(_record_sizes(np.diff(bodies), np.diff(topics), np.diff(props), host_len[born_index],
                                     host_len[store_index]), np.int64)
    data = rebuild_records(fields, sizes, topics, topic_data, bodies, body_data, props, props_data, hosts,
                           b"".join(packed), born_index, store_index)
    return Rebuilt(data, np.cumsum(sizes))


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)


_INT_WIDTHS = {pa.int32(): "<i4", pa.int64(): "<i8", pa.timestamp("us", tz="UTC"): "<i8"}


def _ints(col: pa.ChunkedArray) -> np.ndarray:
    """An int or µs timestamp column's values, read from its buffer in place (no cast, no copy)."""
    arr = _one_chunk(col)
    width = _INT_WIDTHS.get(arr.type)
    if width is None:
        raise ValueError(f"tier column of {arr.type} is not int32, int64 or a timestamp in µs (UTC)")
    if not len(arr):
        return np.zeros(0, np.int64)
    return np.frombuffer(arr.buffers()[1], width, len(arr), arr.offset * np.dtype(width).itemsize)


def _spans(col: pa.ChunkedArray) -> tuple[np.ndarray, pa.Buffer | bytes]:
    """A binary or string column's value offsets (int64, one more than rows) and its data."""
    arr = _one_chunk(col)
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        width = "<i8"
    elif pa.types.is_binary(arr.type) or pa.types.is_string(arr.type):
        width = "<i4"  # the offsets widened, the data not copied
    else:
        raise ValueError(f"tier column {col.type} is not binary or string")
    _, offsets, data = arr.buffers()
    at = np.frombuffer(offsets, width, len(arr) + 1, arr.offset * np.dtype(width).itemsize) if len(arr) else [0]
    return np.array(at, np.int64), b"" if data is None else data


def _distinct(*cols: pa.ChunkedArray) -> tuple[list[str], list[np.ndarray]]:
    """The distinct strings of ``cols`` and each column as indexes into them."""
    both = pa.chunked_array(list(cols[0].chunks) + [c for col in cols[1:] for c in col.chunks], pa.string())
    encoded = both.combine_chunks().dictionary_encode() if len(both) else pa.DictionaryArray.from_arrays(
        pa.array([], pa.int32()), pa.array([], pa.string()))
    index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    bounds = np.cumsum([0] + [len(c) for c in cols])
    return encoded.dictionary.to_pylist(), [index[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def rebuild_records_py(fields: np.ndarray, sizes: np.ndarray, topics: np.ndarray, topic_data: Buffer,
                       bodies: np.ndarray, body_data: Buffer, props: np.ndarray, props_data: Buffer,
                       hosts: np.ndarray, host_data: Buffer, born_index: np.ndarray,
                       store_index: np.ndarray) -> bytes:
    """The reference of the compiled `rebuild_records` (`skiff.common._kernels`): record ``i``
    written by `write_record` from column ``i`` of ``fields`` (`REBUILT_FIELDS`), the spans
    ``i`` of topic, body and properties (``topics[i]:topics[i + 1]`` of ``topic_data``, ...) and
    the packed hosts ``born_index[i]`` and ``store_index[i]`` (spans of ``host_data`` at
    ``hosts``); ``sizes[i]`` its `record_size`. ValueError when a size does not match its parts."""
    out = bytearray(int(sizes.sum()))
    topic_b, body_b, props_b, host_b = (memoryview(d).cast("B") for d in (topic_data, body_data, props_data,
                                                                         host_data))
    h, t, b, p = hosts.tolist(), topics.tolist(), bodies.tolist(), props.tolist()
    packed = [bytes(host_b[h[k]:h[k + 1]]) for k in range(len(h) - 1)]
    pos = 0
    for i, (row, size, born, store) in enumerate(zip(fields.T.tolist(), sizes.tolist(), born_index.tolist(),
                                                     store_index.tolist())):
        queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_ms, store_ms, reconsume, prepared = row
        written = write_record(out, pos, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_ms,
                               packed[born], store_ms, packed[store], reconsume, prepared, body_b[b[i]:b[i + 1]],
                               bytes(topic_b[t[i]:t[i + 1]]), bytes(props_b[p[i]:p[i + 1]]))
        if written != size:
            raise ValueError(f"size {size} of record {i} does not match its parts ({written})")
        pos += written
    return bytes(out)


rebuild_records = kernels.select("rebuild_records", rebuild_records_py)
"""`rebuild_records_py`, compiled where built (`skiff.common.kernels`)."""


def source_properties(raw: Iterable[bytes]) -> list[dict[str, str]]:
    """The ``properties`` column's maps of stored properties (for tests and tools)."""
    return [{k: v for k, v in decode_properties(r).items() if k not in HIDDEN_PROPERTIES} for r in raw]
