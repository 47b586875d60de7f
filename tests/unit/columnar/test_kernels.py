"""The column-wise decoder's compiled kernels (skiff.columnar._kernels: record_starts,
run_columns, record_fields) give exactly what their pure-Python references
(skiff.columnar.record_columns.record_starts_py, skiff.columnar.arrow_decode.run_columns_py,
skiff.columnar.record_fields.record_fields_py) give, on generated runs of records, good,
damaged and cut: the same starts, the same columns and fields, the same refusals and errors.
The tier's key index rows (key_index_rows, reference skiff.columnar.key_rows.key_index_rows_py)
likewise, on generated string columns, and its BLAKE2b-64 equals hashlib's.

Pure (no Spark session, so not marked ``spark``); skipped where the extension is not built
or SKIFF_NO_EXTENSIONS is set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from tests.unit.columnar.record_runs import records as spark_records
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=60, deadline=None)
SPARK = "skiff.columnar._kernels"
NAMES = ("record_starts", "run_columns", "record_fields", "key_index_rows")


compiled = compiled_kernels(SPARK)


def test_each_spark_reference_has_a_compiled_twin_when_built_and_only_there():
    if kernels.compiled("pack_records") is None:
        pytest.skip("the compiled kernels are not built here")
    assert all(callable(kernels.compiled(n, SPARK)) for n in NAMES)
    assert not any(kernels.compiled(n) for n in NAMES)  # not left in skiff.common._kernels as well


def _plain(columns: Any) -> Any:
    """`run_columns`' result with its arrays and buffers as lists and bytes, to compare."""
    if isinstance(columns, tuple):
        return tuple(_plain(c) for c in columns)
    if columns is None or isinstance(columns, (bytes, int)):
        return columns
    if hasattr(columns, "tolist"):
        return columns.tolist()
    return bytes(columns)


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return _plain(call())
    except Exception as exc:  # noqa: BLE001 - both must fail alike (a body that does not inflate)
        return type(exc), str(exc)


@SETTINGS
@given(run=spark_records(), include_properties=st.booleans(), flip=st.integers(0, 2**20), every=st.integers(1, 3))
def test_run_columns_record_fields_and_record_starts_are_identical(run, include_properties, flip, every):
    pytest.importorskip("pyarrow")
    from skiff.common.compression import inflate
    from skiff.common.properties import decode_properties
    from skiff.columnar.arrow_decode import run_columns_py
    from skiff.columnar.record_columns import record_starts_py

    from skiff.columnar.record_fields import record_fields_py

    kernel, walk, fields = compiled("run_columns"), compiled("record_starts"), compiled("record_fields")
    buf = b"".join(run)
    damaged = bytearray(buf)
    if buf:
        damaged[flip % len(buf)] ^= 0xFF
    for data in (buf, bytes(damaged), buf[:-1]):
        starts = record_starts_py(data)
        assert _plain(walk(data)) == _plain(starts)
        if starts is None:
            continue
        args = (data, starts[::every], include_properties, 1000, inflate, decode_properties)
        assert _outcome(lambda: kernel(*args)) == _outcome(lambda: run_columns_py(*args))
        assert _plain(fields(data, starts[::every])) == _plain(record_fields_py(data, starts[::every]))


def test_the_source_uses_the_compiled_kernels_when_built():
    """The names the source calls are the kernels of `skiff.columnar._kernels`, not the references."""
    pytest.importorskip("pyarrow")
    from skiff.columnar import arrow_decode, record_columns, record_fields

    kernel, walk = compiled("run_columns"), compiled("record_starts")
    assert arrow_decode.run_columns is kernel
    assert record_columns._record_starts is walk
    assert record_fields._record_fields is compiled("record_fields")
    from skiff.columnar import key_rows

    assert key_rows.key_index_rows is compiled("key_index_rows")  # what skiff.tier.index.key_index calls


_TOKENS = st.one_of(
    st.sampled_from(["", "a", "b", "a", "é", "ключ", "\U0001d11e", "\t", "a\tb", "ID1"]),
    st.text(st.characters(codec="utf-8", exclude_characters=" "), max_size=12),
    st.integers(120, 300).map(lambda n: "L" * n),  # one block, two, three: the last full or not
    st.text(st.sampled_from("xé\U0001d11e"), min_size=40, max_size=90),  # non-ASCII past 128 bytes
)
_KEYS = st.one_of(st.none(), st.lists(_TOKENS, max_size=40).flatmap(
    lambda tokens: st.lists(st.sampled_from([" ", "  ", " \t "]), min_size=len(tokens), max_size=len(tokens)).map(
        lambda seps: "".join(t + s for t, s in zip(tokens, seps)).rstrip(" ") if tokens else "")),
    st.text(st.sampled_from("ab é "), max_size=20))
_MESSAGES = st.lists(st.tuples(_KEYS, st.one_of(st.none(), _TOKENS), st.integers(-(2**63), 2**63 - 1)), max_size=25)


@SETTINGS
@given(messages=_MESSAGES, cut=st.integers(0, 3), chunks=st.integers(1, 3))
def test_key_index_rows_are_identical(messages, cut, chunks):
    """The same (key_hash, queue_offset) rows in the same order, sliced and chunked columns too."""
    import numpy as np
    import pyarrow as pa

    from skiff.columnar.key_rows import key_index_rows_py, string_buffers

    kernel = compiled("key_index_rows")
    keys = pa.array([k for k, _, _ in messages], pa.string()).slice(min(cut, len(messages)))
    ids = pa.chunked_array(_chunked(pa.array([m for _, m, _ in messages], pa.string())[len(messages) - len(keys):],
                                    chunks), pa.string())
    offsets = np.array([q for _, _, q in messages[len(messages) - len(keys):]], np.int64)
    args = (string_buffers(keys), string_buffers(ids), offsets)
    ours, reference = kernel(*args), key_index_rows_py(*args)
    assert [a.dtype for a in ours] == [np.int64, np.int64]
    assert [a.tobytes() for a in ours] == [a.tobytes() for a in reference]


def _chunked(values, chunks):
    step = max(1, len(values) // chunks)
    return [values[i:i + step] for i in range(0, len(values), step)] or [values]


@SETTINGS
@given(offsets=st.lists(st.integers(-3, 12), min_size=1, max_size=6), data=st.binary(max_size=10),
       valid=st.one_of(st.none(), st.lists(st.booleans(), max_size=6)), shorter=st.sampled_from([0, 0, 0, 1]))
@example(offsets=[0, 2, 4], data=b"ab\xc3(", valid=None, shorter=0)  # bad UTF-8 in the second row
@example(offsets=[0, 4, 2], data=b"abcd", valid=None, shorter=0)
def test_key_index_rows_refuse_bad_columns_alike(offsets, data, valid, shorter):
    """Offsets out of order or past the data, columns of other lengths, bad UTF-8: the same error."""
    import numpy as np

    from skiff.columnar.key_rows import key_index_rows_py

    kernel = compiled("key_index_rows")
    n = max(0, len(offsets) - 1 - shorter)
    bad = (np.array(offsets, np.int32), data, None if valid is None else np.array(valid, bool))
    good = (np.zeros(n + 1, np.int32), b"", None)
    queue_offsets = np.arange(n, dtype=np.int64)
    for args in ((bad, good, queue_offsets), (good, bad, queue_offsets)):
        assert _outcome(lambda: kernel(*args)) == _outcome(lambda: key_index_rows_py(*args))


def test_blake2b_of_8_bytes_equals_hashlibs_for_every_length_to_300():
    """The kernel's BLAKE2b (RFC 7693, 8-byte digest) against hashlib, over the block edges 128 and 256."""
    import hashlib

    from skiff.columnar.key_rows import key_hash

    kernel = compiled("key_hash")
    for n in range(301):
        data = bytes((7 * i + n) % 256 for i in range(n))
        expected = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)
        assert kernel(data) == expected, n
    assert kernel("é 𝄞".encode()) == key_hash("é 𝄞")
