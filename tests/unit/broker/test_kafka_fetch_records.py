"""A Fetch's records made straight from the stored bytes (`served_records`) are the records
(and, encoded, the batch bytes) that the `StoredMessage` path makes: random messages with and
without keys, binary keys, headers, null values, RocketMQ tags and system properties, unicode,
empty and compressed bodies; and the byte limits cut both at the same record."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.broker.kafka.fetch import _size, served_records
from skiff.broker.kafka.mapping import message_record, record_properties
from skiff.common.errors import DecodeError
from skiff.common.properties import encode_properties
from skiff.common.record import pack_host, record_size, write_record
from skiff.common.stored_message import decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.kafka.records import Record, encode_batch

_TEXT = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)
_HOST = pack_host("127.0.0.1", 10911)


def _stored(body: bytes, props: dict[str, str], queue_offset: int, born: int, compressed: bool) -> bytes:
    raw_props = encode_properties(props)
    if compressed:
        body = zlib.compress(body)
    buf = bytearray(record_size(len(body), 1, len(raw_props)))
    write_record(buf, 0, queue_id=0, flag=0, queue_offset=queue_offset, physical_offset=queue_offset * 200,
                 sys_flag=int(MessageSysFlag.COMPRESSED) if compressed else 0, born_timestamp=born,
                 born_host=_HOST, store_timestamp=born + 3, store_host=_HOST, reconsume_times=0,
                 prepared_transaction_offset=0, body=body, topic=b"t", properties=raw_props)
    return bytes(buf)


_kafka_record = st.builds(
    Record, st.just(0), st.integers(0, 2**41),
    st.one_of(st.none(), st.binary(max_size=8), _TEXT.map(str.encode)),
    st.one_of(st.none(), st.binary(max_size=30), _TEXT.map(str.encode)),
    st.lists(st.tuples(_TEXT.filter(bool), st.one_of(st.none(), st.binary(max_size=6), _TEXT.map(str.encode))),
             max_size=3).map(tuple))
_rocketmq_props = st.dictionaries(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "color", "ünï", "KAFKA_KEY"]),
                                  _TEXT, max_size=4)
_message = st.tuples(st.one_of(_kafka_record.map(lambda r: (r.value or b"", record_properties(r), r.timestamp)),
                               st.tuples(st.binary(max_size=30), _rocketmq_props, st.integers(0, 2**41))),
                     st.booleans())


def _reference(data: bytes, max_bytes: int, first: bool) -> tuple[int, list[Record]]:
    """The Fetch before `served_records`: a `StoredMessage` per message, `message_record` of each."""
    messages = decode_records(data)
    base = messages[0].queue_offset
    records: list[Record] = []
    size = 0
    for msg in messages:
        rec = message_record(msg, msg.queue_offset - base)
        if records and size + _size(rec) > max_bytes:
            break
        if not records and not first and _size(rec) > max_bytes:
            return base, []
        records.append(rec)
        size += _size(rec)
    return base, records


@settings(max_examples=150, deadline=None)
@given(st.lists(_message, min_size=1, max_size=12), st.integers(0, 10), st.integers(1, 600), st.booleans())
def test_served_records_are_the_stored_message_paths(messages: list[tuple[tuple[bytes, dict[str, str], int], bool]],
                                                      first_offset: int, max_bytes: int, first: bool) -> None:
    data = b"".join(_stored(body, props, first_offset + i * 2, born, compressed)  # gaps, as compaction leaves
                    for i, ((body, props, born), compressed) in enumerate(messages))
    base, records = served_records(data, max_bytes, first)
    ref_base, ref_records = _reference(data, max_bytes, first)
    assert (base, records) == (ref_base, ref_records)
    if records:
        assert encode_batch(base, records) == encode_batch(ref_base, ref_records)


def test_a_plain_fetch_of_many_keyless_messages() -> None:
    rng = random.Random(7)
    bodies = [rng.randbytes(rng.randrange(0, 200)) for _ in range(300)]
    data = b"".join(_stored(body, {}, 1000 + i, 1_700_000_000_000 + i, False) for i, body in enumerate(bodies))
    base, records = served_records(data, 1 << 20, True)
    assert base == 1000
    assert records == [Record(i, 1_700_000_000_000 + i, None, body, ()) for i, body in enumerate(bodies)]
    assert encode_batch(base, records) == encode_batch(*_reference(data, 1 << 20, True))


def test_a_stored_record_that_does_not_decode_is_refused() -> None:
    data = bytearray(_stored(b"body", {"color": "blue"}, 5, 1, False))
    data[4:8] = b"\x00\x00\x00\x00"  # the magic
    with pytest.raises(DecodeError, match="does not decode"):
        served_records(bytes(data), 1 << 20, True)
    with pytest.raises(DecodeError):
        _reference(bytes(data), 1 << 20, True)
