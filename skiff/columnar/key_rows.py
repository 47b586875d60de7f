"""The rows of a tiered file's key index (`skiff.tier.index`), column-wise: which key hash
belongs to which queue offset, for every message of a table at once.

Each message gives one row per distinct key: every space-separated token of its KEYS
(`split_keys`: empty tokens dropped, nothing else trimmed) and its ``msg_id`` unless that
is empty, each once per message (a key that is also the msg_id, or repeated, collapses),
in that order of first appearance; the row holds `key_hash` of the key and the message's
queue offset. A null KEYS has no tokens, a null or empty msg_id none either.

`key_index_rows` is the compiled kernel (`skiff.columnar._kernels`, BLAKE2b in C: no
Python call per key) where that is built, else `key_index_rows_py`, its reference,
message by message with `hashlib`. Both take the string columns as the plain buffers of
their Arrow arrays (`string_buffers`), so the kernel reads them without a Python string
per row, and both give the same two int64 arrays, in the same order (the index sorts them
after: `skiff.tier.index.sorted_index`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from skiff.common import kernels
from skiff.common.properties import split_keys

StringBuffers = tuple[np.ndarray, Any, np.ndarray | None]
"""A string column as its Arrow buffers: the int32 offsets of its rows into the data (n + 1 of
them, not necessarily from 0), the data (bytes or an Arrow buffer), and where a row is set
(bool, None when no row is null). A null row's span is ignored."""


def key_hash(key: str) -> int:
    """The index's hash of a key: the first 8 bytes of its UTF-8 BLAKE2b digest (``digest_size=8``,
    no key), signed big-endian. Fixed by the index files already written: do not change it."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)


def string_buffers(values: pa.Array | pa.ChunkedArray) -> StringBuffers:
    """A string column's buffers for `key_index_rows`, without copying its bytes (a chunked
    column is joined first, a large or view string column cast to a plain one)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != pa.string():
        values = values.cast(pa.string())
    n = len(values)
    _, offsets, data = values.buffers()
    at = np.frombuffer(offsets, np.int32, n + 1, values.offset * 4) if offsets is not None else np.zeros(1, np.int32)
    valid = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else None
    return at, data if data is not None else b"", valid


def check_columns(keys: StringBuffers, msg_ids: StringBuffers, queue_offsets: np.ndarray) -> None:
    """ValueError unless both string columns have one row per queue offset and their offsets
    stay within their data in order: what both implementations check before reading a byte."""
    n = len(queue_offsets)
    for name, (offsets, data, valid) in (("keys", keys), ("msg_id", msg_ids)):
        if len(offsets) != n + 1 or (valid is not None and len(valid) != n):
            raise ValueError(f"the {name} column has not one row per queue offset ({n})")
        if n and (int(offsets[0]) < 0 or int(offsets[-1]) > memoryview(data).nbytes
                  or bool((np.diff(offsets) < 0).any())):
            raise ValueError(f"the {name} column's offsets do not fit its data")


def key_index_rows_py(keys: StringBuffers, msg_ids: StringBuffers, queue_offsets: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The reference of the compiled `key_index_rows`: (key_hash, queue_offset) int64 arrays,
    one row per distinct key of each message, messages in order, keys in order of appearance."""
    check_columns(keys, msg_ids, queue_offsets)
    hashes: list[int] = []
    offsets: list[int] = []
    for text, msg_id, offset in zip(_strings(*keys), _strings(*msg_ids), queue_offsets.tolist()):
        for key in dict.fromkeys([*split_keys(text), *([msg_id] if msg_id else [])]):
            hashes.append(key_hash(key))
            offsets.append(offset)
    return np.array(hashes, np.int64), np.array(offsets, np.int64)


def _strings(offsets: np.ndarray, data: Any, valid: np.ndarray | None) -> Iterator[str | None]:
    """The column's values one by one (strict UTF-8: a bad byte is a UnicodeDecodeError)."""
    raw = memoryview(data).cast("B")
    bounds = offsets.tolist()
    for i in range(len(bounds) - 1):
        yield None if valid is not None and not valid[i] else bytes(raw[bounds[i]:bounds[i + 1]]).decode()


key_index_rows = kernels.select("key_index_rows", key_index_rows_py, "skiff.columnar._kernels")
