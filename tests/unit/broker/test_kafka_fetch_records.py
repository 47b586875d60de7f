"""A Fetch's record batch made straight from the stored bytes (`skiff.protocol.kafka.stored_batch`)
holds the records (and the batch bytes) that the `StoredMessage` path makes: random messages with
and without keys, binary keys, headers, null values, RocketMQ tags and system properties, unicode,
empty and compressed bodies, IPv6 hosts; the byte limits cut both at the same record. The compiled
kernel (`_records.pyx`'s ``stored_batch``) makes the reference's bytes or declines."""

from __future__ import annotations

import random
import zlib
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.broker.kafka.fetch import Fetch
from skiff.broker.kafka.mapping import message_record, raw_record, record_properties
from skiff.common.errors import DecodeError
from skiff.common.properties import encode_properties
from skiff.common.record import pack_host, record_size, write_record
from skiff.common.stored_message import decode_records
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.kafka.records import Record, encode_batch
from skiff.protocol.kafka.stored_batch import record_size as kafka_record_size
from skiff.protocol.kafka.stored_batch import stored_batch, stored_batch_py, stored_records
from tests.unit.kernel_twins import compiled_kernels, damaged

compiled = compiled_kernels("skiff.protocol.kafka._records")
_TEXT = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=10)
_HOST = pack_host("127.0.0.1", 10911)


_HOST_V6 = pack_host("::1", 10911)


def _stored(body: bytes, props: dict[str, str], queue_offset: int, born: int, compressed: bool,
            born_host: bytes = _HOST, store_host: bytes = _HOST) -> bytes:
    raw_props = encode_properties(props)
    if compressed:
        body = zlib.compress(body)
    buf = bytearray(record_size(len(body), 1, len(raw_props), len(born_host), len(store_host)))
    write_record(buf, 0, queue_id=0, flag=0, queue_offset=queue_offset, physical_offset=queue_offset * 200,
                 sys_flag=int(MessageSysFlag.COMPRESSED) if compressed else 0, born_timestamp=born,
                 born_host=born_host, store_timestamp=born, store_host=store_host, reconsume_times=0,
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
    """The Fetch before the stored bytes were read directly: a `StoredMessage` per message,
    `message_record` of each."""
    messages = decode_records(data)
    base = messages[0].queue_offset
    records: list[Record] = []
    size = 0
    for msg in messages:
        rec = message_record(msg, msg.queue_offset - base)
        if records and size + kafka_record_size(rec) > max_bytes:
            break
        if not records and not first and kafka_record_size(rec) > max_bytes:
            return base, []
        records.append(rec)
        size += kafka_record_size(rec)
    return base, records


@settings(max_examples=150, deadline=None)
@given(st.lists(_message, min_size=1, max_size=12), st.integers(0, 10), st.integers(1, 600), st.booleans())
def test_stored_records_are_the_stored_message_paths(messages: list[tuple[tuple[bytes, dict[str, str], int], bool]],
                                                      first_offset: int, max_bytes: int, first: bool) -> None:
    data = b"".join(_stored(body, props, first_offset + i * 2, born, compressed)  # gaps, as compaction leaves
                    for i, ((body, props, born), compressed) in enumerate(messages))
    base, records = stored_records(data, max_bytes, first, raw_record)
    ref_base, ref_records = _reference(data, max_bytes, first)
    assert (base, records) == (ref_base, ref_records)
    batch = encode_batch(ref_base, ref_records) if ref_records else b""
    assert stored_batch(data, max_bytes, first, raw_record) == (ref_base, batch)
    assert stored_batch_py(data, max_bytes, first, raw_record) == (ref_base, batch)


def test_a_plain_fetch_of_many_keyless_messages() -> None:
    rng = random.Random(7)
    bodies = [rng.randbytes(rng.randrange(0, 200)) for _ in range(300)]
    data = b"".join(_stored(body, {}, 1000 + i, 1_700_000_000_000 + i, False) for i, body in enumerate(bodies))
    base, records = stored_records(data, 1 << 20, True, raw_record)
    assert base == 1000
    assert records == [Record(i, 1_700_000_000_000 + i, None, body, ()) for i, body in enumerate(bodies)]
    assert stored_batch(data, 1 << 20, True, raw_record) == (1000, encode_batch(*_reference(data, 1 << 20, True)))


def test_a_stored_record_that_does_not_decode_is_refused() -> None:
    data = bytearray(_stored(b"body", {"color": "blue"}, 5, 1, False))
    data[4:8] = b"\x00\x00\x00\x00"  # the magic
    with pytest.raises(DecodeError, match="does not decode"):
        stored_batch(bytes(data), 1 << 20, True, raw_record)
    with pytest.raises(DecodeError):
        _reference(bytes(data), 1 << 20, True)


def _random_run(rng: random.Random) -> bytes:
    """Stored records as a pull reads them: keyless Kafka records (no properties), keyed ones
    with headers, RocketMQ messages; IPv6 hosts, empty bodies, gaps, wide and negative times."""
    base_born = rng.choice([0, 1_700_000_000_000, -5, 2**62, -(2**63)])
    offset = rng.choice([0, 7, 2**40])
    out = []
    for _ in range(rng.choice([1, 1, 2, 5, 40, 300])):
        kind = rng.random()
        props: dict[str, str] = {}
        if kind > 0.85:
            props = {"KEYS": "a b", "TAGS": "T", "UNIQ_KEY": "U"}
        elif kind > 0.6:
            headers = tuple((rng.choice(["h", "ü", "x" * 30]), rng.choice([None, b"", b"text", rng.randbytes(4)]))
                            for _ in range(rng.choice([0, 1, 3])))
            props = record_properties(Record(0, 0, rng.choice([None, b"", b"k-1", rng.randbytes(5)]),
                                             rng.choice([None, b"v"]), headers))
        born = base_born + rng.choice([0, 1, -1000, 10**6]) if base_born > -(2**63) else base_born
        hosts = rng.choice([(_HOST, _HOST), (_HOST_V6, _HOST), (_HOST, _HOST_V6), (_HOST_V6, _HOST_V6)])
        out.append(_stored(rng.choice([b"", rng.randbytes(rng.randrange(1, 300))]), props, offset,
                           max(min(born, 2**63 - 1), -(2**63)), False, *hosts))
        offset += rng.choice([1, 1, 1, 2, 50])
    return b"".join(out)


def _batch_py(data: bytes, max_bytes: int, first: bool, record_of: Any) -> tuple[int, bytes] | type[Exception]:
    try:
        return stored_batch_py(data, max_bytes, first, record_of)
    except Exception as exc:  # what the reference raises, the kernel must leave to it
        return type(exc)


def test_the_kernel_makes_the_references_batch() -> None:
    kernel = compiled("stored_batch")
    rng = random.Random(29)
    for _ in range(300):
        data = _random_run(rng)
        max_bytes, first = rng.choice([1 << 20, 0, 100, 2000, 30_000]), rng.random() < 0.7
        assert kernel(data, max_bytes, first, raw_record, crc32c.crc32c) == stored_batch_py(
            data, max_bytes, first, raw_record)
    assert kernel(b"", 1 << 20, True, raw_record, crc32c.crc32c) == (0, b"")


def test_the_kernel_leaves_what_it_cannot_make_exactly_to_the_reference() -> None:
    kernel = compiled("stored_batch")
    rng = random.Random(26)
    declined = 0
    for _ in range(600):
        data = damaged(rng, _random_run(rng), flip=0.5, cut=0.3, tail=100)
        got = kernel(data, 1 << 20, True, raw_record, crc32c.crc32c)
        if got is None:
            declined += 1
        else:  # a flipped bit in a body, a time or an offset still decodes: the same batch
            assert got == _batch_py(data, 1 << 20, True, raw_record)
        assert kernel(bytearray(data), 1 << 20, True, raw_record, crc32c.crc32c) is None  # bytes or a memoryview only
    assert declined > 200
    compressed = _stored(b"x" * 100, {}, 0, 1, True)
    assert kernel(compressed, 1 << 20, True, raw_record, crc32c.crc32c) is None
    assert stored_batch(compressed, 1 << 20, True, raw_record)[1] == encode_batch(0, [Record(0, 1, None, b"x" * 100)])


def test_a_view_of_a_reused_buffer_makes_the_batch_of_its_bytes() -> None:
    """The Fetch copies the pulled records into one buffer it reuses (`Fetch._pulled`): the
    kernel's batch of a view of it is the batch of its bytes, and nothing it returns (a mapped
    record's values included) changes when the buffer is written over."""
    kernel = compiled("stored_batch")
    rng = random.Random(41)
    buffer = bytearray(1 << 17)
    made = 0
    for _ in range(300):
        data = _random_run(rng)
        if len(data) > len(buffer):
            continue
        max_bytes, first = rng.choice([1 << 20, 0, 100, 2000, 30_000]), rng.random() < 0.7
        buffer[:len(data)] = data
        got = kernel(memoryview(buffer)[:len(data)], max_bytes, first, raw_record, crc32c.crc32c)
        expected = stored_batch_py(data, max_bytes, first, raw_record)
        buffer[:len(data)] = bytes(rng.randrange(256) for _ in range(8)) * (len(data) // 8) + bytes(len(data) % 8)
        assert got == expected
        made += got[1] != b""
    assert made > 100
    assert stored_batch(memoryview(b"".join([_stored(b"x", {}, 0, 1, True)])), 1 << 20, True, raw_record)[1] == \
        encode_batch(0, [Record(0, 1, None, b"x")])  # declined (compressed): the reference reads its bytes


def test_the_fetch_joins_the_pulled_buffers_into_one_it_keeps() -> None:
    fetch = Fetch.__new__(Fetch)
    fetch._buffer = bytearray()
    rng = random.Random(7)
    kept = None
    for size in (5000, 300, 4999, 6000):
        parts = [rng.randbytes(size // 3), memoryview(rng.randbytes(size - size // 3))]
        view = fetch._pulled(parts)
        assert bytes(view) == b"".join(parts)
        if kept is not None and size <= len(kept):
            assert fetch._buffer is kept  # no new buffer while the pulled records fit
        kept = fetch._buffer


def test_times_whose_deltas_pass_64_bits_are_left_to_the_reference() -> None:
    data = _stored(b"a", {}, 0, -(2**63), False) + _stored(b"b", {}, 1, 2**63 - 1, False)
    assert compiled("stored_batch")(data, 1 << 20, True, raw_record, crc32c.crc32c) is None
    assert stored_batch(data, 1 << 20, True, raw_record) == stored_batch_py(data, 1 << 20, True, raw_record)


@pytest.mark.parametrize("mapped", [
    Record(0, 1, bytearray(b"k"), b"v"),  # not bytes
    Record(0, 1, None, b"v", ((b"name", b"v"),)),  # a header name that is not str
    Record(0, 2**64, None, b"v"),  # a time past 64 bits
    Record(2**31, 1, None, b"v"),  # an offset delta past the header's 32 bits
], ids=["bytearray-key", "bytes-name", "wide-time", "wide-delta"])
def test_mapped_records_it_does_not_write_exactly_are_left_to_the_reference(mapped: Record) -> None:
    data = _stored(b"v", {"KEYS": "k"}, 0, 1, False)
    assert compiled("stored_batch")(data, 1 << 20, True, lambda *_: mapped, crc32c.crc32c) is None
