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

from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from skiff.columnar.arrow_decode import binary_spans, decode_run
from skiff.columnar.record_columns import record_starts
from skiff.columnar.record_fields import record_fields, span_texts
from skiff.columnar.schema import HIDDEN_PROPERTIES, SOURCE_FIELDS
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
    return b"".join(rows_to_record_list(table))


_REBUILT = ("topic", "queue_id", "queue_offset", "body", "born_timestamp", "store_timestamp", "reconsume_times",
            "flag", "sys_flag", "born_host", "store_host", "commit_log_offset", "prepared_transaction_offset",
            "raw_properties")
_TIMESTAMPS = frozenset({"born_timestamp", "store_timestamp"})


def rows_to_record_list(table: pa.Table) -> list[bytes]:
    """Each tier row's stored record, rebuilt."""
    cols = [(table.column(n).cast(pa.int64()) if n in _TIMESTAMPS else table.column(n)).to_pylist() for n in _REBUILT]
    return [_record(*row) for row in zip(*cols)]


def _record(topic: str, queue_id: int, queue_offset: int, body: bytes, born_us: int, stored_us: int,
            reconsume_times: int, flag: int, sys_flag: int, born_host: str, store_host: str,
            commit_log_offset: int, prepared: int, raw_props: bytes) -> bytes:
    born_packed = pack_host(*parse_host_port(born_host))
    store_packed = pack_host(*parse_host_port(store_host))
    topic_b = topic.encode()
    buf = bytearray(record_size(len(body), len(topic_b), len(raw_props), len(born_packed), len(store_packed)))
    write_record(buf, 0, queue_id, flag, queue_offset, commit_log_offset, sys_flag, born_us // _US_PER_MS,
                 born_packed, stored_us // _US_PER_MS, store_packed, reconsume_times, prepared, body, topic_b,
                 raw_props)
    return bytes(buf)


def source_properties(raw: Iterable[bytes]) -> list[dict[str, str]]:
    """The ``properties`` column's maps of stored properties (for tests and tools)."""
    return [{k: v for k, v in decode_properties(r).items() if k not in HIDDEN_PROPERTIES} for r in raw]
