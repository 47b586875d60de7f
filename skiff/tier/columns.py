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

from collections.abc import Iterable, Sequence

import pyarrow as pa

from skiff.columnar.schema import HIDDEN_PROPERTIES, SOURCE_FIELDS
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import pack_host, parse_host_port, read_head, read_tail, record_size, write_record
from skiff.common.stored_message import StoredMessage, decode_records
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
_COMPRESSED = int(MessageSysFlag.COMPRESSED)


def _row(m: StoredMessage, raw_props: bytes, broker: str) -> tuple[object, ...]:
    props = m.properties
    shown = [(k, v) for k, v in props.items() if k not in HIDDEN_PROPERTIES]
    return (m.topic, broker, m.queue_id, m.queue_offset, m.msg_id, props.get(Prop.KEYS), props.get(Prop.TAGS),
            m.body, shown, m.born_timestamp * _US_PER_MS, m.store_timestamp * _US_PER_MS, m.reconsume_times,
            m.flag, m.sys_flag & ~_COMPRESSED, m.born_host, m.store_host, m.commit_log_offset,
            m.prepared_transaction_offset, raw_props)


def _raw_properties(buf: bytes, messages: Sequence[StoredMessage]) -> list[bytes]:
    """Each record's properties as stored (the decoded map would lose their order and WAIT)."""
    out, pos = [], 0
    for m in messages:
        out.append(read_tail(buf, pos, read_head(buf, pos)).properties_raw)
        pos += m.store_size
    return out


def records_to_table(buf: bytes | memoryview, broker: str) -> pa.Table:
    """The tier rows of a run of stored records (one queue's, back to back, as a pull answer)."""
    data = bytes(buf)
    messages = decode_records(data)
    raws = _raw_properties(data, messages)
    rows = [_row(m, raw, broker) for m, raw in zip(messages, raws)]
    columns: list[Sequence[object]] = [list(c) for c in zip(*rows)] if rows else [[] for _ in TIER_SCHEMA]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, TIER_SCHEMA)], schema=TIER_SCHEMA)


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
