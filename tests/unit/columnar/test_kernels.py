"""The column-wise decoder's compiled kernels (skiff.columnar._kernels: record_starts,
run_columns, record_fields) give exactly what their pure-Python references
(skiff.columnar.record_columns.record_starts_py, skiff.columnar.arrow_decode.run_columns_py,
skiff.columnar.record_fields.record_fields_py) give, on generated runs of records, good,
damaged and cut: the same starts, the same columns and fields, the same refusals and errors.

Pure (no Spark session, so not marked ``spark``); skipped where the extension is not built
or SKIFF_NO_EXTENSIONS is set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from tests.unit.columnar.record_runs import records as spark_records
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=60, deadline=None)
SPARK = "skiff.columnar._kernels"
NAMES = ("record_starts", "run_columns", "record_fields")


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
