"""Tier rows back into stored records (`skiff.tier.columns.rebuild`, column-wise): records →
`records_to_table` → rebuilt records are the records themselves, byte for byte, for plain,
compressed (rebuilt inflated, without the COMPRESSED bit: the module's rule), IPv6 and
transactional records, on slices and on tables of several chunks; the compiled kernel
(`skiff.common._kernels.rebuild_records`) writes what its reference (`write_record` per row)
writes, and refuses columns that do not hold together instead of reading past them. Pure: no
broker."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from skiff.common.record import read_head, read_tail, record_size, write_record
from skiff.common.sysflag import MessageSysFlag
from skiff.tier import columns
from skiff.tier.columns import rebuild, records_to_table, rows_to_record_list, rows_to_records
from tests.unit.kernel_twins import compiled_kernels
from tests.unit.tier.records import make_records
from tests.unit.tier.test_records_to_table import records

compiled = compiled_kernels("skiff.common._kernels")
_COMPRESSED = int(MessageSysFlag.COMPRESSED)


@contextmanager
def implementation(which: str) -> Iterator[None]:
    """`rebuild` on the compiled kernel or on its pure-Python reference."""
    if which == "compiled":
        kernel = compiled("rebuild_records")
        assert columns.rebuild_records is kernel
        yield
        return
    with mock.patch.object(columns, "rebuild_records", columns.rebuild_records_py):
        yield


def as_rebuilt(run: bytes) -> bytes:
    """``run`` as the tier gives it back: each compressed record with its body inflated and no
    COMPRESSED bit (the other bytes as stored, the body CRC of the inflated body)."""
    out, pos = bytearray(), 0
    while pos < len(run):
        head = read_head(run, pos)
        tail = read_tail(run, pos, head)
        if head.sys_flag & _COMPRESSED:
            body = zlib.decompress(run[tail.body_pos:tail.body_pos + tail.body_length])
            topic = tail.topic.encode()
            raw = bytearray(record_size(len(body), len(topic), len(tail.properties_raw), len(head.born_host),
                                        len(head.store_host)))
            write_record(raw, 0, head.queue_id, head.flag, head.queue_offset, head.physical_offset,
                         head.sys_flag & ~_COMPRESSED, head.born_timestamp, head.born_host, head.store_timestamp,
                         head.store_host, head.reconsume_times, head.prepared_transaction_offset, body, topic,
                         tail.properties_raw)
            out += raw
        else:
            out += run[pos:pos + head.total_size]
        pos += head.total_size
    return bytes(out)


@pytest.mark.parametrize("which", ["compiled", "python"])
@settings(max_examples=150, deadline=None)
@given(run=records(), cut=st.integers(0, 8))
def test_records_through_the_table_come_back_byte_for_byte(which, run, cut):
    table = records_to_table(run, "broker-a")
    want = as_rebuilt(run)
    with implementation(which):
        got = rebuild(table)
        listed = rows_to_record_list(table)
        sliced = rows_to_records(table.slice(cut))
        chunked = rows_to_records(pa.concat_tables([table.slice(0, cut), table.slice(cut)]))
    assert got.records == want
    assert b"".join(listed) == want and [len(r) for r in listed] == np.diff(got.ends, prepend=0).tolist()
    assert sliced == b"".join(listed[cut:])
    assert chunked == want


def test_the_compressed_ipv6_transactional_cases_are_there():
    """The generated runs hold what the rule is about (so the property above means something)."""
    seen: set[str] = set()

    @settings(max_examples=150, deadline=None)
    @given(run=records())
    def collect(run: bytes) -> None:
        pos = 0
        while pos < len(run):
            head = read_head(run, pos)
            seen.update(name for name, bit in (("compressed", _COMPRESSED), ("ipv6", 0x10 | 0x20),
                                               ("prepared", int(MessageSysFlag.TRANSACTION_PREPARED)))
                        if head.sys_flag & bit)
            pos += head.total_size

    collect()
    assert seen == {"compressed", "ipv6", "prepared"}


@pytest.mark.parametrize("which", ["compiled", "python"])
def test_a_plain_run_many_hosts_and_the_empty_table(which):
    run = make_records("Orders", 3, 40, 300)
    table = records_to_table(run, "broker-b")
    many = table.set_column(table.schema.get_field_index("born_host"), "born_host",
                            pa.array([f"10.0.{i // 256}.{i % 256}:{5000 + i}" for i in range(300)]))
    wide = table.set_column(table.schema.get_field_index("body"), "body", table.column("body").cast(pa.large_binary()))
    with implementation(which):
        assert rows_to_records(table) == run
        assert rows_to_records(wide) == run  # 64-bit offsets read as well
        assert rows_to_record_list(table.slice(0, 0)) == [] and rows_to_records(table.slice(0, 0)) == b""
        assert [read_head(r).born_host for r in rows_to_record_list(many)][299] == bytes([10, 0, 1, 43]) + \
            (5299).to_bytes(4, "big")


def test_rows_with_a_null_are_refused_with_what_is_missing():
    table = records_to_table(make_records("Orders", 3, 0, 3), "b")
    body = table.schema.get_field_index("body")
    holed = table.set_column(body, "body", pa.array([b"x", None, b"z"], pa.binary()))
    with pytest.raises(ValueError, match="nulls in body: not rows of a tiered file"):
        rebuild(holed)


def _kernel_inputs(table: pa.Table) -> dict[str, object]:
    """What `rebuild` hands the kernel for ``table``, captured."""
    seen: dict[str, object] = {}

    def capture(*args: object) -> bytes:
        seen.update(zip(("fields", "sizes", "topics", "topic_data", "bodies", "body_data", "props", "props_data",
                         "hosts", "host_data", "born_index", "store_index"), args))
        return columns.rebuild_records_py(*args)  # type: ignore[arg-type]

    with mock.patch.object(columns, "rebuild_records", capture):
        rebuild(table)
    return seen


@settings(max_examples=100, deadline=None)
@given(run=records())
def test_the_kernel_writes_what_its_reference_writes(run):
    kernel = compiled("rebuild_records")
    args = _kernel_inputs(records_to_table(run, "broker-a"))
    if args:
        assert kernel(*args.values()) == columns.rebuild_records_py(*args.values())  # type: ignore[arg-type]


def test_the_kernel_refuses_columns_that_do_not_hold_together():
    kernel = compiled("rebuild_records")
    good = _kernel_inputs(records_to_table(make_records("Orders", 3, 0, 4), "b"))
    assert kernel(*good.values()) == make_records("Orders", 3, 0, 4)
    bodies = np.array(good["bodies"])
    hosts = np.array(good["hosts"])
    for change, message in (
        ({"sizes": np.array(good["sizes"]) + 1}, "does not match its parts"),
        ({"bodies": np.where(np.arange(len(bodies)) == 4, bodies[4] + 1, bodies)}, "is not within"),
        ({"born_index": np.full(4, 7, np.int64)}, "are not among"),
        ({"hosts": np.where(np.arange(len(hosts)) == 1, hosts[1] - 1, hosts)}, "neither 8 nor 20"),
        ({"fields": np.zeros(3, np.int64)}, "not 36 int64 values"),
    ):
        with pytest.raises(ValueError, match=message):
            kernel(*{**good, **change}.values())
