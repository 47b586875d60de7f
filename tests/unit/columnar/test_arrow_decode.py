"""The columnar decoder against the message decoder: on generated runs of records (IPv4 and
IPv6 hosts, empty and compressed bodies, odd property strings: not UTF-8, repeated names,
pairs without a value), every column of `decode_run` equals what `decode_records` gives
message by message. Pure: no broker, no Spark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.columnar.arrow_decode import decode_run
from skiff.columnar.record_columns import record_starts, record_starts_py
from skiff.columnar.schema import ARROW_SCHEMA, HIDDEN_PROPERTIES
from skiff.common.errors import DecodeError
from skiff.common.properties import Prop
from skiff.common.record import pack_host, record_size, write_record
from skiff.common.stored_message import StoredMessage, decode_records
from tests.unit.columnar.record_runs import MQ, records



def expected_rows(messages: list[StoredMessage], include_properties: bool) -> dict[str, list]:
    """The columns the row path built from decoded messages."""
    return {
        "queue_offset": [m.queue_offset for m in messages],
        "msg_id": [m.msg_id for m in messages],
        "keys": [m.properties.get(Prop.KEYS) for m in messages],
        "tags": [m.properties.get(Prop.TAGS) for m in messages],
        "body": [m.body for m in messages],
        "properties": [[(k, v) for k, v in m.properties.items() if k not in HIDDEN_PROPERTIES]
                       if include_properties else None for m in messages],
        "born_timestamp": [m.born_timestamp * 1000 for m in messages],
        "store_timestamp": [m.store_timestamp * 1000 for m in messages],
        "reconsume_times": [m.reconsume_times for m in messages],
    }


def columns(batch: pa.RecordBatch) -> dict[str, list]:
    out = {name: batch.column(name).to_pylist() for name in ("queue_offset", "msg_id", "keys", "tags", "body",
                                                              "properties", "reconsume_times")}
    for name in ("born_timestamp", "store_timestamp"):
        out[name] = batch.column(name).cast(pa.int64()).to_pylist()
    return out


@settings(max_examples=300, deadline=None)
@given(run=records(), include_properties=st.booleans(), recheck=st.sampled_from([None, frozenset({"", "a", "b"})]))
def test_the_columns_equal_the_message_decoder(run, include_properties, recheck):
    buf = b"".join(run)
    messages = decode_records(buf)
    if recheck is not None:
        messages = [m for m in messages if m.get_property(Prop.TAGS) in recheck]
    batch = decode_run(buf, None, MQ, include_properties, recheck)
    assert batch.schema == ARROW_SCHEMA
    assert columns(batch) == expected_rows(messages, include_properties)
    assert set(batch.column("topic").to_pylist()) <= {MQ.topic}
    assert set(batch.column("queue_id").to_pylist()) <= {MQ.queue_id}


@given(run=records())
def test_chosen_starts_pick_those_records(run):
    buf = b"".join(run)
    starts = record_starts_py(buf)
    assert np.array_equal(record_starts(buf), starts)
    picked = starts[::2]
    batch = decode_run(buf, picked, MQ)
    assert batch.column("queue_offset").to_pylist() == [m.queue_offset for m in decode_records(buf)[::2]]


@pytest.mark.parametrize("cut", [
    lambda b: b[:-1],                                 # the last record cut short
    lambda b: b[:4] + b"\x00\x00\x00\x01" + b[8:],    # bad magic
    lambda b: b[:84] + b"\x00\x00\x7f\xff" + b[88:],  # a body length past the record
    lambda b: b"\x00\x00\x00\x08" + b[4:],            # a size too small for a record
])
def test_a_broken_run_fails_as_the_message_decoder_says(cut):
    body = b"payload"
    raw = bytearray(record_size(len(body), 6, 0))
    write_record(raw, 0, queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=1,
                 born_host=pack_host("127.0.0.1", 1), store_timestamp=2, store_host=pack_host("127.0.0.1", 2),
                 reconsume_times=0, prepared_transaction_offset=0, body=body, topic=b"Orders", properties=b"")
    bad = cut(bytes(raw) * 2)
    with pytest.raises(DecodeError) as expected:
        decode_records(bad)
    with pytest.raises(DecodeError) as got:
        decode_run(bad, None, MQ)
    assert str(got.value) == str(expected.value)
