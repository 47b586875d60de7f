"""skiff.common._kernels' compiled kernels give the same bytes and results as their
pure-Python references on the same inputs (hypothesis), every kernel module holds the
kernels it should, and the selection point honours SKIFF_NO_EXTENSIONS. (The other modules'
twins are tested beside their packages: tests/unit/store/test_kernels.py,
tests/unit/broker/test_writer_kernels.py, tests/unit/columnar/test_kernels.py,
tests/unit/protocol/test_frame_kernels.py; `rebuild_records`, the tier's, in
tests/unit/tier/test_rebuild.py.)

Where the extension is not built the comparisons are skipped, and the references are
what every other test exercises."""

from __future__ import annotations

import itertools
import os
import dataclasses
import subprocess
import sys
from collections.abc import Sequence
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from skiff.common.record import HOST_V4_BYTES, HOST_V6_BYTES, pack_records_py, record_size
from skiff.common.stored_message import decode_run_py
from skiff.store.dispatcher import DispatchBatch, QueueRun
from skiff.store.results import MessageInput
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=60, deadline=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
HOST = st.sampled_from([HOST_V4_BYTES, HOST_V6_BYTES]).flatmap(lambda n: st.binary(min_size=n, max_size=n))


compiled = compiled_kernels("skiff.common._kernels")


KERNEL_MODULES = {
    "skiff.common._kernels": ("pack_records", "decode_run", "rebuild_records"),
    "skiff.store._kernels": ("batch_columns", "index_key_items", "put_index_entries", "put_queue_entries",
                             "offset_msg_ids", "replicated_columns"),
    "skiff.broker._kernels": ("batch_inputs",),
    "skiff.columnar._kernels": ("record_starts", "run_columns", "record_fields", "key_index_rows"),
    "skiff.protocol._frames": ("json_frames", "json_head", "plain_sends", "sent_answers", "pack_batch",
                               "split_batch"),
    "skiff.protocol.kafka._records": ("decode_plain_batches", "encode_records"),
}
"""Each kernel module (setup.py builds them together) and the kernels it holds."""


def test_each_reference_has_a_compiled_twin_when_built():
    if kernels.compiled("pack_records") is None:
        pytest.skip("the compiled kernels are not built here")
    missing = [(module, name) for module, names in KERNEL_MODULES.items() for name in names
               if not callable(kernels.compiled(name, module))]
    assert missing == []


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


V4_HOST = bytes(range(1, 9))
HOSTS = st.sampled_from([V4_HOST, bytes(range(2, 10)), V4_HOST + bytes(12)])
"""Few hosts, one a v6 host that starts with the v4 one's bytes: runs where a record's host
is the previous one's, and where it differs only in length."""
TIMES = st.sampled_from([0, 255, 256, 1_700_000_000_000, 2**63 - 1, -1])
repeating_rows = st.lists(
    st.tuples(st.just("T"), st.integers(0, 3), st.binary(max_size=20), st.just(b""), st.just(0), st.just(0),
              TIMES, HOSTS, st.just(0), st.just(0)),
    min_size=1, max_size=12,
)


def _run_of(pieces: Sequence[tuple[list[tuple], bytes, int]]) -> bytes:
    """Runs of records stored by the given store hosts at the given times, back to back."""
    out = b""
    for rows_of, store_host, store_ts in pieces:
        sizes = [record_size(len(r[2]), 1, 0, len(r[7]), len(store_host)) for r in rows_of]
        out += pack_records_py(rows_of, b"T", range(len(rows_of)), list(itertools.accumulate(sizes[:-1], initial=0)),
                               sizes, store_ts, store_host)
    return out


@SETTINGS
@given(pieces=st.lists(st.tuples(repeating_rows, HOSTS, TIMES), min_size=1, max_size=4))
def test_decode_run_is_identical_where_hosts_and_times_repeat_and_change(pieces):
    """The kernel hands out a record's host or timestamp again while the next records hold the
    same one: equal to the reference's values wherever they repeat, change value or length."""
    kernel = compiled("decode_run")
    run = _run_of(pieces)
    assert kernel(run, tuple, None, None, 1000) == decode_run_py(run, tuple, None, None, 1000)


def test_decode_run_shares_the_objects_of_repeated_hosts_and_times():
    kernel = compiled("decode_run")
    row = ("T", 0, b"b", b"", 0, 0, 1_700_000_000_000, V4_HOST, 0, 0)
    other = row[:6] + (1_700_000_000_001, V4_HOST + bytes(12)) + row[8:]
    out, bad = kernel(_run_of([([row, row, other], V4_HOST, 10**12)]), tuple, None, None, 1000)
    assert bad == -1 and len(out) == 3
    (a, b, c), born_ts, store_ts, born, store = out, 8, 10, 18, 19
    assert all(a[k] is b[k] for k in (born_ts, store_ts, born, store))
    assert a[born_ts] != c[born_ts] and a[born] != c[born] and a[store] is c[store]
    assert c[born] == V4_HOST + bytes(12) and c[born_ts] == 1_700_000_000_001
