"""A tiered file's key index: which queue offsets of the file carry which key.

Queries by key (KEYS, UNIQ_KEY) must find messages whose local copy is gone, and a
tiered file holds up to `TIER_SEGMENT_MAX_MESSAGES` of them in bodies-heavy Parquet:
scanning files for a key would fetch the whole history. So each file gets a small
companion written at upload, before the manifest that lists both (a crash leaves either
unlisted, collected as orphans; the same rows give the same bytes, so a retried upload
writes the same object):

    <topic>/<broker>/<queueId>/<first:020>-<last:020>.keys      (Parquet, zstd)

| column | type | |
|---|---|---|
| key_hash | int64 | the key's 8-byte BLAKE2b digest, signed big-endian (`key_hash`) |
| queue_offset | int64 | the message's offset in its queue |

One row per key of a message (each space-separated KEYS token, and its ``msg_id``:
UNIQ_KEY, or the offset message id when it has none), sorted by (key_hash,
queue_offset), so a lookup is a binary search. Hashes, not keys: 16 bytes a key
whatever its length, about a tenth of the file it indexes. A hash can collide, so
every hit is checked on the row itself (`row_has_key`), as the local IndexFile's are.
The name does not end in ``.parquet``: a glob over a topic's data files does not pick
it up.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skiff.columnar.key_rows import key_hash as key_hash
from skiff.columnar.key_rows import key_index_rows, string_buffers
from skiff.common.properties import Prop, decode_properties, split_keys

INDEX_SUFFIX = ".keys"
INDEX_SCHEMA = pa.schema([pa.field("key_hash", pa.int64()), pa.field("queue_offset", pa.int64())])


def index_file(data_file: str) -> str:
    """The index's key beside the data file it indexes."""
    return data_file.removesuffix(".parquet") + INDEX_SUFFIX


def key_index(table: pa.Table) -> pa.Table:
    """The index rows of a tier table (it needs the keys, msg_id and queue_offset columns), made
    column-wise by `skiff.columnar.key_rows.key_index_rows` (compiled where built)."""
    hashes, offsets = key_index_rows(string_buffers(table.column("keys")), string_buffers(table.column("msg_id")),
                                     table.column("queue_offset").to_numpy())
    return _in_order(hashes, offsets)


def sorted_index(index: pa.Table) -> pa.Table:
    """Index rows in the index's order, (key_hash, queue_offset): how `key_index` ends, and how a
    compacted file's index made from other files' index rows (`Tier.rewrite`) is the same bytes."""
    return _in_order(index.column("key_hash").to_numpy(), index.column("queue_offset").to_numpy())


def _in_order(h: np.ndarray, o: np.ndarray) -> pa.Table:
    order = np.lexsort((o, h))
    return pa.Table.from_arrays([pa.array(h[order], pa.int64()), pa.array(o[order], pa.int64())],
                                schema=INDEX_SCHEMA)


def index_bytes(index: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(index, sink, compression="zstd")
    return sink.getvalue()


def offsets_of(index: pa.Table, key: str) -> list[int]:
    """The queue offsets the index lists for ``key`` (a superset: hashes can collide)."""
    hashes = index.column("key_hash").to_numpy()
    h = key_hash(key)
    lo, hi = np.searchsorted(hashes, h, "left"), np.searchsorted(hashes, h, "right")
    return sorted(set(index.column("queue_offset").to_numpy()[lo:hi].tolist()))


def row_has_key(raw_properties: bytes, key: str) -> bool:
    """Whether a row's message has ``key`` among its KEYS or as its UNIQ_KEY (the rule the
    broker's local index applies to its hits)."""
    props = decode_properties(raw_properties)
    return props.get(Prop.UNIQ_KEY) == key or key in split_keys(props.get(Prop.KEYS))


def rows_with_key(table: pa.Table, key: str) -> pa.Table:
    """The rows of ``table`` whose message has ``key``."""
    keep: Sequence[bool] = [row_has_key(raw, key) for raw in table.column("raw_properties").to_pylist()]
    return table.filter(pa.array(keep, pa.bool_()))
