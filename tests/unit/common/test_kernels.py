"""Every compiled kernel gives the same bytes and results as its pure-Python reference
on the same inputs (hypothesis), and the selection point honours SKIFF_NO_EXTENSIONS.

Where the extension is not built the comparisons are skipped, and the references are
what every other test exercises."""

from __future__ import annotations

import itertools
import os
import dataclasses
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.broker.writer import batch_inputs_py
from skiff.common import kernels
from skiff.common.record import HOST_V4_BYTES, HOST_V6_BYTES, pack_records_py, record_size
from skiff.common.stored_message import decode_run_py
from skiff.store.dispatcher import DispatchBatch, QueueRun
from skiff.store.results import MessageInput
from tests.unit.spark.record_runs import records as spark_records

SETTINGS = settings(max_examples=60, deadline=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
HOST = st.sampled_from([HOST_V4_BYTES, HOST_V6_BYTES]).flatmap(lambda n: st.binary(min_size=n, max_size=n))
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def compiled(name: str) -> Callable[..., Any]:
    kernel = kernels.compiled(name)
    if kernel is None or kernels.DISABLED:  # not built, or the pure-Python run of `make test`
        pytest.skip("the compiled kernels are not built here, or switched off")
    return kernel


def test_each_reference_has_a_compiled_twin_when_built():
    names = ["pack_records", "decode_run", "batch_inputs", "record_starts", "run_columns"]
    if kernels.compiled("pack_records") is None:
        pytest.skip("the compiled kernels are not built here")
    assert all(callable(kernels.compiled(n)) for n in names)


def test_skiff_no_extensions_selects_the_references_and_skiff_version_says_so():
    code = ("from skiff.common import kernels, record; "
            "print(kernels.IMPLEMENTATION); print(record.pack_records is record.pack_records_py)")
    env = {**os.environ, "SKIFF_NO_EXTENSIONS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[1] == "True" and out.startswith("pure Python")
    for extra, words in (({"SKIFF_NO_EXTENSIONS": "1"}, "pure Python"), ({}, kernels.IMPLEMENTATION)):
        version = subprocess.run([sys.executable, "-m", "skiff", "version"], env={**os.environ, **extra},
                                 capture_output=True, text=True, check=True).stdout
        assert version.startswith("skiff 0.1.0 (Python ") and words in version, version


def test_row_types_have_the_layout_the_kernels_read():
    assert MessageInput._fields == kernels.ROW_LAYOUTS["MessageInput"]
    assert DispatchBatch._fields == kernels.ROW_LAYOUTS["DispatchBatch"]
    kernels.check_row_layout(MessageInput)
    kernels.check_row_layout(DispatchBatch)


def test_a_reordered_row_type_fails_where_it_is_defined():
    with pytest.raises(kernels.RowLayoutError, match=r"MessageInput has the fields \('topic', 'queue_id', 'properties', "
                                                    r"'body'.* in the order \('topic', 'queue_id', 'body', 'properties'"):
        @kernels.kernel_row
        class MessageInput(NamedTuple):  # body and properties swapped
            topic: str
            queue_id: int
            properties: bytes
            body: bytes
            flag: int
            sys_flag: int
            born_timestamp: int
            born_host: bytes
            reconsume_times: int = 0
            prepared_transaction_offset: int = 0
            tags: str | None = None
            keys: str | None = None
            uniq_key: str | None = None

    with pytest.raises(kernels.RowLayoutError, match="DispatchBatch"):
        @kernels.kernel_row
        class DispatchBatch(NamedTuple):  # a column inserted before runs
            topics: Sequence[str]
            queue_ids: Sequence[int]
            queue_offsets: Sequence[int]
            physical_offsets: Sequence[int]
            sizes: Sequence[int]
            tag_codes: Sequence[int]
            store_timestamps: Sequence[int]
            sys_flags: Sequence[int]
            keys: Sequence[str | None]
            uniq_keys: Sequence[str | None]
            bodies: Sequence[bytes]
            runs: list[QueueRun] | None = None


def test_the_layout_check_reads_dataclass_fields_too():
    fields = kernels.ROW_LAYOUTS["MessageInput"]
    same = dataclasses.make_dataclass("MessageInput", fields)
    assert kernels.kernel_row(same) is same
    with pytest.raises(kernels.RowLayoutError):
        kernels.check_row_layout(dataclasses.make_dataclass("MessageInput", fields[1:] + fields[:1]))


rows = st.lists(
    st.tuples(st.just("T"), st.integers(0, 2**31 - 1), st.binary(max_size=300), st.binary(max_size=200), INT32,
              st.integers(0, 2**31 - 1).map(lambda f: f & ~0x30), INT64, HOST, INT32, INT64),
    min_size=1, max_size=20,
)


@SETTINGS
@given(rows=rows, topic=st.binary(min_size=1, max_size=40), store_host=HOST, store_ts=INT64,
       base=st.integers(0, 2**40), with_crcs=st.booleans(), as_messages=st.booleans())
def test_pack_records_is_identical(rows, topic, store_host, store_ts, base, with_crcs, as_messages):
    kernel = compiled("pack_records")
    if as_messages:
        rows = [MessageInput(topic=t, queue_id=q, body=b, properties=p, flag=f, sys_flag=s, born_timestamp=bt,
                             born_host=h, reconsume_times=rt, prepared_transaction_offset=pt)
                for t, q, b, p, f, s, bt, h, rt, pt in rows]
    sizes = [record_size(len(r[2]), len(topic), len(r[3]), len(r[7]), len(store_host)) for r in rows]
    phys = list(itertools.accumulate(sizes[:-1], initial=base))
    crcs = [len(r[2]) * 7919 for r in rows] if with_crcs else None
    args = (rows, topic, range(base, base + len(rows)), phys, sizes, store_ts, store_host, crcs)
    packed = kernel(*args)
    assert packed == pack_records_py(*args)
    into_kernel, into_py = bytearray(len(packed) + 9), bytearray(len(packed) + 9)
    assert kernel(*args, into_kernel, 5) is None and pack_records_py(*args, into_py, 5) is None
    assert into_kernel == into_py == bytes(5) + packed + bytes(4)


def test_pack_records_body_crc_is_zlibs_at_every_length():
    """The kernel's CRC-32 folds 64 bytes and more 16 a step (PCLMULQDQ, where the CPU has it),
    then goes eight bytes a step, then byte by byte: every split of a length, and lengths past
    a kilobyte, give zlib's value (the reference's)."""
    kernel = compiled("pack_records")
    data = os.urandom(1100)
    rows = [("T", 1, data[: n], b"", 0, 0, 5, bytes(8), 0, 0) for n in [*range(260), 1023, 1024, 1025, 1100]]
    sizes = [record_size(len(r[2]), 1, 0) for r in rows]
    args = (rows, b"T", range(len(rows)), list(itertools.accumulate(sizes[:-1], initial=0)), sizes, 9, bytes(8))
    assert kernel(*args) == pack_records_py(*args)


def test_pack_records_takes_memoryview_bodies():
    kernel = compiled("pack_records")
    row = ("T", 1, memoryview(b"body"), bytearray(b"k\x01v\x02"), 0, 0, 5, bytes(8), 0, 0)
    size = record_size(4, 1, 4)
    args = ([row], b"T", [0], [0], [size], 9, bytes(8))
    assert kernel(*args) == pack_records_py(*args)


def test_pack_records_refuses_sizes_that_do_not_match_instead_of_overrunning():
    kernel = compiled("pack_records")
    row = ("T", 1, b"body", b"", 0, 0, 5, bytes(8), 0, 0)
    with pytest.raises(ValueError):
        kernel([row], b"T", [0], [0], [10], 9, bytes(8))
    size = record_size(4, 1, 0)
    out = bytearray(2 * size)
    with pytest.raises(ValueError):  # the second record's size is wrong: neither is written
        kernel([row, row], b"T", [0, 1], [0, size], [size, size + 1], 9, bytes(8), None, out, 0)
    assert out == bytes(2 * size)
    for impl in (kernel, pack_records_py):
        with pytest.raises(ValueError):  # no room
            impl([row, row], b"T", [0, 1], [0, size], [size, size], 9, bytes(8), None, out, 1)
        assert out == bytes(2 * size)


@SETTINGS
@given(rows=rows, store_host=HOST, cut=st.integers(0, 120), junk=st.binary(max_size=100),
       flip=st.integers(0, 400), inflating=st.booleans())
def test_decode_run_is_identical_on_good_cut_and_damaged_runs(rows, store_host, cut, junk, flip, inflating):
    kernel = compiled("decode_run")
    rows = [(r[0], r[1], r[2], r[3], r[4], r[5] | (1 if i % 2 else 0), *r[6:]) for i, r in enumerate(rows)]
    sizes = [record_size(len(r[2]), 1, len(r[3]), len(r[7]), len(store_host)) for r in rows]
    run = pack_records_py(rows, b"T", range(len(rows)), list(itertools.accumulate(sizes[:-1], initial=0)), sizes,
                          77, store_host)
    damaged = bytearray(run)
    damaged[flip % len(run)] ^= 0xFF
    inflate = (lambda body, limit: body[::-1] + limit.to_bytes(4, "big")) if inflating else None
    src = object()
    for data in (run, run[: max(0, len(run) - cut)], run + junk, bytes(damaged)):
        assert kernel(data, tuple, src, inflate, 1000) == decode_run_py(data, tuple, src, inflate, 1000)


PROPERTY_NAME = st.sampled_from([b"TAGS", b"KEYS", b"UNIQ_KEY", b"WAIT", b"DELAY", b"TIMER_ID", b"", b"T\x01",
                                 b"\xff\xfe"])
PROPERTY_VALUE = st.one_of(TEXT.map(str.encode), st.binary(max_size=8))
"""Names the writer reads, refuses and passes, and malformed ones (empty, with a 0x01 inside,
not UTF-8); values of text or any bytes (invalid UTF-8 and separators included)."""
property_strings = st.lists(st.tuples(PROPERTY_NAME, PROPERTY_VALUE), max_size=6).flatmap(
    lambda pairs: st.tuples(st.just(pairs), st.booleans())).map(
    lambda drawn: b"\x02".join(n + b"\x01" + v for n, v in drawn[0]) + (b"\x02" if drawn[1] else b""))


@SETTINGS
@given(props=st.lists(property_strings, min_size=1, max_size=8), uniform=st.booleans(),
       refused=st.sampled_from([("DELAY", "TIMER_ID"), (), ("WAIT",)]))
def test_batch_inputs_are_identical_and_decline_the_same_batches(props, uniform, refused):
    """Batches with the same names in every message (the reference's column path) and mixed ones."""
    if uniform:
        props = [props[0]] * len(props)
    head = ("T", 3, 8, 1_700_000_000_000, bytes(8), 2)
    args = (MessageInput, head, list(range(len(props))), [b"b%d" % i for i in range(len(props))], props,
            ("TAGS", "KEYS", "UNIQ_KEY"), refused)
    got = compiled("batch_inputs")(*args)
    assert got == batch_inputs_py(*args)
    assert got is None or all(type(row) is MessageInput for row in got)


def test_batch_inputs_read_the_last_of_a_repeated_name_and_skip_malformed_pairs():
    props = b"TAGS\x01a\x02TAGS\x01b\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x01x\x02\x01v\x02"
    for impl in filter(None, (kernels.compiled("batch_inputs"), batch_inputs_py)):
        (row,) = impl(MessageInput, ("T", 0, 0, 1, bytes(8), 0), [7], [b"body"], [props], ("TAGS", "KEYS", "UNIQ_KEY"),
                      ("DELAY",))
        assert (row.tags, row.keys, row.uniq_key, row.flag, row.body, row.properties) == ("b", "k1 k2", None, 7,
                                                                                         b"body", props)
        assert impl(MessageInput, ("T", 0, 0, 1, bytes(8), 0), [0], [b""], [b"DELAY\x013"], ("TAGS", "KEYS", "UNIQ_KEY"),
                    ("DELAY",)) is None


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
def test_spark_run_columns_and_record_starts_are_identical(run, include_properties, flip, every):
    pytest.importorskip("pyarrow")
    from skiff.common.compression import inflate
    from skiff.common.properties import decode_properties
    from skiff.spark.arrow_decode import run_columns_py
    from skiff.spark.record_columns import record_starts_py

    kernel, walk = compiled("run_columns"), compiled("record_starts")
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
