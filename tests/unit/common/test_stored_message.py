"""Decoded messages read their fields from the record lazily: every field must equal
what a full decode of the same record gives, and the type must behave as the
NamedTuple it replaced (fields, _replace, _asdict, iteration, equality, pickling,
immutability)."""

import pickle
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.common.msgid import create_offset_msg_id
from skiff.common.properties import decode_properties, encode_properties, split_keys
from skiff.common.record import (
    pack_host,
    read_head,
    read_tail,
    record_size,
    unpack_host,
    write_record,
)
from skiff.common.stored_message import (
    StoredMessage,
    decode_record,
    decode_records,
    raw_property,
)
from skiff.common.sysflag import MessageSysFlag

prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                    max_size=12)
hosts = st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 5555), ("::1", 10911), ("fe80::1", 1)])


def record(body: bytes, topic: str, props: dict[str, str], born: tuple[str, int], store: tuple[str, int],
           queue_offset: int, sys_flag: int = 0) -> bytes:
    raw_props = encode_properties(props)
    bh, sh = pack_host(*born), pack_host(*store)
    buf = bytearray(record_size(len(body), len(topic.encode()), len(raw_props), len(bh), len(sh)))
    write_record(buf, 0, queue_id=5, flag=9, queue_offset=queue_offset, physical_offset=4096 + queue_offset,
                 sys_flag=sys_flag, born_timestamp=1_700_000_000_000, born_host=bh,
                 store_timestamp=1_700_000_000_007, store_host=sh, reconsume_times=2,
                 prepared_transaction_offset=77, body=body, topic=topic.encode(), properties=raw_props)
    return bytes(buf)


def reference(raw: bytes) -> StoredMessage:
    """The record decoded field by field from the layout functions, eagerly."""
    head = read_head(raw)
    tail = read_tail(raw, 0, head)
    return StoredMessage(
        tail.topic, raw[tail.body_pos : tail.body_pos + tail.body_length], decode_properties(tail.properties_raw),
        head.flag, head.queue_id, head.queue_offset, head.physical_offset, head.sys_flag, head.born_timestamp,
        unpack_host(head.born_host), head.store_timestamp, unpack_host(head.store_host), head.reconsume_times,
        head.prepared_transaction_offset, head.body_crc, head.total_size,
        create_offset_msg_id(head.store_host, head.physical_offset),
    )


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(st.tuples(st.binary(max_size=200), st.from_regex(r"[A-Za-z0-9_%|-]{1,40}", fullmatch=True),
                               st.dictionaries(prop_text.filter(bool), prop_text, max_size=5), hosts, hosts),
                     min_size=1, max_size=4),
    names=st.lists(prop_text, max_size=3),
)
def test_every_field_equals_a_full_decode(records, names):
    raws = [record(body, topic, props, born, store, i) for i, (body, topic, props, born, store) in enumerate(records)]
    decoded = decode_records(b"".join(raws))
    for raw, msg, (_, _, props, _, _) in zip(raws, decoded, records):
        expected = reference(raw)
        assert msg == expected and tuple(msg) == tuple(expected)
        for name in [*props, *names, "UNIQ_KEY", "TAGS", "KEYS"]:
            assert msg.get_property(name) == props.get(name)
        assert (msg.msg_id, msg.tags, msg.keys) == (
            props.get("UNIQ_KEY") or expected.offset_msg_id, props.get("TAGS"), split_keys(props.get("KEYS")))
        assert msg.properties == props


separated = st.text(alphabet="AB\x01\x02é", max_size=24)


@settings(max_examples=400, deadline=None)
@given(raw=separated, name=st.text(alphabet="AB\x01\x02é", max_size=3))
def test_one_property_from_the_raw_string_is_the_dicts(raw, name):
    data = raw.encode()
    assert raw_property(data, name) == decode_properties(data).get(name)


def test_bytes_that_are_not_utf8_decode_as_the_dict_does():
    data = b"A\xff\x01v\xfe\x02B\x01w\x02"
    for name in ("A\ufffd", "B"):
        assert raw_property(data, name) == decode_properties(data).get(name)


def test_extra_properties_join_and_override_without_a_dict():
    raw = record(b"x", "T", {"TAGS": "a", "MIN_OFFSET": "stale"}, ("127.0.0.1", 1), ("127.0.0.1", 2), 0)
    [msg] = decode_records(raw, extra_properties={"MIN_OFFSET": "3", "MAX_OFFSET": "9"})
    assert msg.get_property("MIN_OFFSET") == "3" and msg.get_property("TAGS") == "a"
    assert msg.properties == {"TAGS": "a", "MIN_OFFSET": "3", "MAX_OFFSET": "9"}
    msg.properties["mine"] = "kept"
    assert msg.get_property("mine") == "kept"


def test_compressed_bodies_are_inflated_at_decode():
    raw = record(zlib.compress(b"abc" * 100), "T", {}, ("127.0.0.1", 1), ("127.0.0.1", 2), 0,
                 sys_flag=MessageSysFlag.COMPRESSED)
    [msg] = decode_records(raw)
    assert msg.body == b"abc" * 100 and msg.sys_flag & MessageSysFlag.COMPRESSED


def test_a_record_decoded_from_a_buffer_outlives_changes_to_it():
    raw = record(b"body", "T", {"K": "v"}, ("127.0.0.1", 1), ("127.0.0.1", 2), 3)
    buf = bytearray(b"\x00" * 10 + raw)
    msg = decode_record(memoryview(buf), 10)
    buf[:] = b"\xff" * len(buf)
    assert (msg.body, msg.topic, msg.properties, msg.queue_offset) == (b"body", "T", {"K": "v"}, 3)


def test_the_namedtuple_api_is_kept():
    raw = record(b"body", "T", {"UNIQ_KEY": "U1"}, ("127.0.0.1", 1), ("127.0.0.1", 2), 3)
    decoded = decode_record(raw)
    eager = StoredMessage("T", b"body", {"UNIQ_KEY": "U1"}, queue_offset=3)
    for msg in (decoded, eager):
        assert msg._fields[:3] == ("topic", "body", "properties") and len(msg) == len(msg._fields) == 17
        assert list(msg._asdict()) == list(msg._fields) and msg[1] == b"body" and next(iter(msg)) == "T"
        changed = msg._replace(topic="U", reconsume_times=4)
        assert (changed.topic, changed.reconsume_times, changed.body, msg.topic) == ("U", 4, b"body", "T")
        assert pickle.loads(pickle.dumps(msg)) == msg
        assert StoredMessage._make(msg) == msg and repr(msg).startswith("StoredMessage(topic='T', body=b'body'")
        assert msg.msg_id == "U1" and msg.get_property("missing", "d") == "d"
        with pytest.raises(AttributeError):
            msg.topic = "other"  # type: ignore[misc]
        with pytest.raises(AttributeError):
            msg.queue_offset = 4  # type: ignore[misc]
        with pytest.raises(AttributeError):
            del msg.body
        with pytest.raises(TypeError):
            hash(msg)
    assert decoded != eager and decoded == decoded._replace()


@pytest.mark.parametrize(("cut", "message"), [
    (lambda raw: raw[:50], "record at 0 is cut short"),
    (lambda raw: raw[:4] + b"\x00" * 4 + raw[8:], "record at 0: bad magic 0x0"),
    (lambda raw: raw[:-1], "record at 0: size 100 overruns the buffer"),
    (lambda raw: raw[:84] + (50).to_bytes(4, "big") + raw[88:], "record at 0: body length 50 overruns the record"),
    (lambda raw: raw[:-6] + (5).to_bytes(2, "big") + raw[-4:], "record at 0: properties length 5 does not fit"),
])
def test_a_bad_record_is_named_with_what_is_wrong(cut, message):
    raw = record(b"body", "T", {"K": "v"}, ("127.0.0.1", 1), ("127.0.0.1", 2), 3)
    assert len(raw) == 100
    with pytest.raises(DecodeError, match=f"^{message}$"):
        decode_records(cut(raw))
