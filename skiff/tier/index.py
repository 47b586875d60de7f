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
| key_hash | int64 | the first 8 bytes of the key's BLAKE2b digest, signed big-endian |
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

import hashlib
import io
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skiff.common.properties import Prop, decode_properties, split_keys

INDEX_SUFFIX = ".keys"
INDEX_SCHEMA = pa.schema([pa.field("key_hash", pa.int64()), pa.field("queue_offset", pa.int64())])


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


def index_file(data_file: str) -> str:
    """The index's key beside the data file it indexes."""
    return data_file.removesuffix(".parquet") + INDEX_SUFFIX


def key_index(table: pa.Table) -> pa.Table:
    """The index rows of a tier table (it needs the keys, msg_id and queue_offset columns)."""
    hashes: list[int] = []
    offsets: list[int] = []
    for keys, msg_id, offset in zip(table.column("keys").to_pylist(), table.column("msg_id").to_pylist(),
                                    table.column("queue_offset").to_pylist()):
        for key in {*split_keys(keys), *([msg_id] if msg_id else [])}:
            hashes.append(key_hash(key))
            offsets.append(offset)
    return sorted_index(pa.Table.from_arrays([pa.array(hashes, pa.int64()), pa.array(offsets, pa.int64())],
                                             schema=INDEX_SCHEMA))


def sorted_index(index: pa.Table) -> pa.Table:
    """Index rows in the index's order, (key_hash, queue_offset): how `key_index` ends, and how a
    compacted file's index made from other files' index rows (`Tier.rewrite`) is the same bytes."""
    h, o = index.column("key_hash").to_numpy(), index.column("queue_offset").to_numpy()
    order = np.lexsort((o, h))
    return pa.Table.from_arrays([pa.array(h[order]), pa.array(o[order])], schema=INDEX_SCHEMA)


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
