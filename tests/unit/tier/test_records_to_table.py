"""`records_to_table` (column-wise, no Python object per message) against a reference built
message by message from `decode_records`, on generated runs: IPv4 and IPv6 hosts, plain and
compressed bodies, with and without UNIQ_KEY, odd properties (not UTF-8, repeated names,
many pairs), transactional sysFlags and prepared offsets, several topics and queues in one
run, the empty run. Both with the compiled kernels and with their pure-Python references
(the twin pattern: the compiled pass is skipped where they are not built or switched off).
Pure: no broker."""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.columnar import arrow_decode, record_columns
from skiff.columnar.schema import HIDDEN_PROPERTIES
from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.properties import Prop
from skiff.common.record import pack_host, read_head, read_tail, record_size, write_record
from skiff.common.stored_message import StoredMessage, decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.tier.columns import TIER_SCHEMA, records_to_table
from tests.unit.columnar.record_runs import hosts, properties
from tests.unit.tier.records import make_records

KERNELS = "skiff.columnar._kernels"


def reference_table(buf: bytes, broker: str) -> pa.Table:
    """The tier table as the upload built it before it went column-wise: each record decoded
    into a `StoredMessage`, a row tuple per message, `pa.array` per column."""
    messages = decode_records(buf)
    rows = []
    pos = 0
    for m in messages:
        raw_props = read_tail(buf, pos, read_head(buf, pos)).properties_raw
        pos += m.store_size
        props = m.properties
        shown = [(k, v) for k, v in props.items() if k not in HIDDEN_PROPERTIES]
        rows.append((m.topic, broker, m.queue_id, m.queue_offset, m.msg_id, props.get(Prop.KEYS),
                     props.get(Prop.TAGS), m.body, shown, m.born_timestamp * 1000, m.store_timestamp * 1000,
                     m.reconsume_times, m.flag, m.sys_flag & ~int(MessageSysFlag.COMPRESSED), m.born_host,
                     m.store_host, m.commit_log_offset, m.prepared_transaction_offset, raw_props))
    columns: list[Sequence[object]] = [list(c) for c in zip(*rows)] if rows else [[] for _ in TIER_SCHEMA]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, TIER_SCHEMA)], schema=TIER_SCHEMA)


@contextmanager
def implementation(which: str) -> Iterator[None]:
    """Run `records_to_table` on the compiled kernels or on their pure-Python references."""
    if which == "compiled":
        if kernels.DISABLED or kernels.compiled("run_columns", KERNELS) is None:
            pytest.skip("the compiled kernels are not built here, or switched off")
        assert arrow_decode.run_columns is kernels.compiled("run_columns", KERNELS)
        yield
        return
    with mock.patch.object(arrow_decode, "run_columns", arrow_decode.run_columns_py), \
            mock.patch.object(record_columns, "_record_starts", record_columns.record_starts_py):
        yield


TX_FLAGS = [0, int(MessageSysFlag.TRANSACTION_PREPARED), int(MessageSysFlag.TRANSACTION_COMMIT),
            int(MessageSysFlag.TRANSACTION_ROLLBACK), int(MessageSysFlag.MULTI_TAGS)]


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A run of up to eight records, mostly of one queue (sometimes of several topics and queues)."""
    topics = draw(st.lists(st.sampled_from(["Orders", "T", "Ö-topic", "RMQ_SYS_TRANS_HALF_TOPIC"]), min_size=1,
                           max_size=3))
    out = bytearray()
    for offset in range(draw(st.integers(0, 8))):
        body = draw(st.binary(max_size=40))
        sys_flag = draw(st.sampled_from(TX_FLAGS))
        if draw(st.booleans()):
            body, sys_flag = zlib.compress(body), sys_flag | int(MessageSysFlag.COMPRESSED)
        born, store = pack_host(*draw(hosts)), pack_host(*draw(hosts))
        props = draw(properties())
        topic = draw(st.sampled_from(topics)).encode()
        raw = bytearray(record_size(len(body), len(topic), len(props), len(born), len(store)))
        write_record(raw, 0, queue_id=draw(st.sampled_from([3, 3, 0, 7])), flag=draw(st.integers(-3, 2**31 - 1)),
                     queue_offset=100 + offset, physical_offset=draw(st.integers(0, 2**40)), sys_flag=sys_flag,
                     born_timestamp=1_700_000_000_000 + offset, born_host=born,
                     store_timestamp=1_700_000_000_500 - offset, store_host=store,
                     reconsume_times=draw(st.integers(0, 3)),
                     prepared_transaction_offset=draw(st.sampled_from([0, 0, 123_456, 2**40])),
                     body=body, topic=topic, properties=props)
        out += raw
    return bytes(out)


@pytest.mark.parametrize("which", ["compiled", "python"])
@settings(max_examples=150, deadline=None)
@given(run=records())
def test_the_table_equals_the_one_built_message_by_message(which, run):
    with implementation(which):
        table = records_to_table(run, "broker-a")
    want = reference_table(run, "broker-a")
    assert table.schema.equals(want.schema)
    assert table.equals(want), {n: (table.column(n).to_pylist(), want.column(n).to_pylist())
                                for n in TIER_SCHEMA.names if not table.column(n).equals(want.column(n))}


@pytest.mark.parametrize("which", ["compiled", "python"])
def test_a_plain_run_and_the_empty_run(which):
    run = make_records("Orders", 3, 40, 200)
    with implementation(which):
        table = records_to_table(memoryview(run), "broker-b")
        empty = records_to_table(b"", "broker-b")
    assert table.equals(reference_table(run, "broker-b"))
    assert table.column("queue_offset").to_pylist() == list(range(40, 240))
    assert table.column("born_host").to_pylist() == ["10.0.0.1:5000"] * 200
    assert empty.num_rows == 0 and empty.equals(reference_table(b"", "broker-b"))


@pytest.mark.parametrize("which", ["compiled", "python"])
def test_a_broken_run_fails_as_the_message_decoder_says(which):
    run = make_records("Orders", 3, 0, 3)
    for broken in (run[:-1], run[:4] + b"\x00" * 4 + run[8:]):
        with pytest.raises(DecodeError) as decoder:
            decode_records(broken)
        with implementation(which), pytest.raises(DecodeError) as ours:
            records_to_table(broken, "broker-a")
        assert str(ours.value) == str(decoder.value)


def test_the_reference_is_what_decode_records_gives():
    """The reference itself reads the messages as the decoder does (so its equality means something)."""
    run = make_records("Orders", 3, 0, 5)
    table = reference_table(run, "b")
    messages: list[StoredMessage] = decode_records(run)
    assert table.column("msg_id").to_pylist() == [m.msg_id for m in messages]
    assert table.column("raw_properties").to_pylist()[0].startswith(b"KEYS\x01k0 k0\x02")
