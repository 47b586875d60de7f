"""The tier's key index made column-wise (`skiff.columnar.key_rows.key_index_rows`, compiled or
not) is the same file, byte for byte, as the per-message index that wrote the files already
in tiers: its rows are the rule the docstring of `skiff.tier.index` states, checked on data.
Run with and without the compiled kernels (``make test`` reruns it on pure Python)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from skiff.columnar.key_rows import key_hash, key_index_rows, string_buffers
from skiff.common.properties import split_keys
from skiff.tier.columns import records_to_table
from skiff.tier.index import INDEX_SCHEMA, index_bytes, key_index, offsets_of, sorted_index
from tests.unit.tier.records import make_records


def _per_message_index(table: pa.Table) -> pa.Table:
    """The index as it was built before the kernel (Python sets, message by message): the pin."""
    hashes: list[int] = []
    offsets: list[int] = []
    for keys, msg_id, offset in zip(table.column("keys").to_pylist(), table.column("msg_id").to_pylist(),
                                    table.column("queue_offset").to_pylist()):
        for key in {*split_keys(keys), *([msg_id] if msg_id else [])}:
            hashes.append(key_hash(key))
            offsets.append(offset)
    return sorted_index(pa.Table.from_arrays([pa.array(hashes, pa.int64()), pa.array(offsets, pa.int64())],
                                             schema=INDEX_SCHEMA))


ODD_ROWS = [  # (keys, msg_id): repeats, spaces, empty and missing values, non-ASCII, keys past one and two blocks
    ("a b a", "b"), (None, "ID-1"), ("", ""), ("  x  y ", None), ("é ключ é", "\U0001d11e"), ("L" * 300, "L" * 300),
    ("k\tk k", "k"), (" ", "id"), ("x" * 129 + " " + "x" * 128, "x" * 257),
]


def _table(rows: list[tuple[str | None, str | None]], first: int = 100) -> pa.Table:
    return pa.table({"keys": pa.array([k for k, _ in rows], pa.string()),
                     "msg_id": pa.array([m for _, m in rows], pa.string()),
                     "queue_offset": pa.array(range(first, first + len(rows)), pa.int64())})


def test_the_index_file_is_the_same_bytes_as_the_per_message_one():
    stored = records_to_table(make_records("T", 0, 0, 300), "b")
    odd = _table(ODD_ROWS * 3)
    chunked = pa.concat_tables([odd.slice(0, 5), odd.slice(5, 9), odd.slice(14)])
    for table in (stored, odd, chunked, odd.slice(0, 0)):
        assert index_bytes(key_index(table)) == index_bytes(_per_message_index(table))
    # k<i>, k<i % 7> and the UNIQ_KEY: 3 rows a message, 2 for the first 7 ("k3 k3": one row)
    assert key_index(stored).num_rows == 300 * 3 - 7
    assert key_index(stored).column("queue_offset").to_pylist().count(3) == 2


def test_each_message_gives_one_row_per_distinct_key_in_order():
    """KEYS tokens split on single spaces only, empty ones dropped, then the msg_id unless empty."""
    hashes, offsets = key_index_rows(*(string_buffers(_table(ODD_ROWS).column(c)) for c in ("keys", "msg_id")),
                                     np.arange(100, 100 + len(ODD_ROWS), dtype=np.int64))
    expected = [("a", 100), ("b", 100), ("ID-1", 101), ("x", 103), ("y", 103), ("é", 104), ("ключ", 104),
                ("\U0001d11e", 104), ("L" * 300, 105), ("k\tk", 106), ("k", 106), ("id", 107),
                ("x" * 129, 108), ("x" * 128, 108), ("x" * 257, 108)]
    assert list(zip(hashes.tolist(), offsets.tolist())) == [(key_hash(k), o) for k, o in expected]
    index = key_index(_table(ODD_ROWS))
    assert offsets_of(index, "k") == [106] and offsets_of(index, "x" * 128) == [108] and offsets_of(index, "") == []
