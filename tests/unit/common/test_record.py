import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.common.msgid import UniqIdGenerator, create_offset_msg_id, decode_offset_msg_id
from skiff.common.properties import decode_properties, encode_properties
from skiff.common import record
from skiff.common.record import MAGIC_V1, pack_host, read_head, record_size, write_record
from skiff.common.stored_message import decode_record, decode_records
from skiff.common.sysflag import MessageSysFlag

prop_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20
)


@given(st.dictionaries(prop_text.filter(bool), prop_text, max_size=8))
def test_properties_round_trip(props):
    assert decode_properties(encode_properties(props)) == props


def test_properties_tolerate_missing_trailer_and_junk():
    assert decode_properties(b"A\x01b\x02C\x01d") == {"A": "b", "C": "d"}
    assert decode_properties(b"junk\x02A\x01b\x02x\x01y\x01z\x02") == {"A": "b"}


def _write(body, topic="T", props=None, host=("127.0.0.1", 10911), born=("10.1.2.3", 5555), **kw):
    props_raw = encode_properties(props or {})
    bh, sh = pack_host(*born), pack_host(*host)
    size = record_size(len(body), len(topic.encode()), len(props_raw), len(bh), len(sh))
    buf = bytearray(size)
    args = dict(
        queue_id=3, flag=7, queue_offset=42, physical_offset=1000, sys_flag=0, born_timestamp=111,
        born_host=bh, store_timestamp=222, store_host=sh, reconsume_times=1,
        prepared_transaction_offset=0,
    )
    args.update(kw)
    n = write_record(buf, 0, body=body, topic=topic.encode(), properties=props_raw, **args)
    assert n == size
    return bytes(buf)


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=300),
    topic=st.from_regex(r"[A-Za-z0-9_%|-]{1,127}", fullmatch=True),
    props=st.dictionaries(prop_text.filter(bool), prop_text, max_size=5),
    qoff=st.integers(0, 2**62),
)
def test_record_round_trip(body, topic, props, qoff):
    raw = _write(body, topic, props, queue_offset=qoff)
    assert len(raw) == 91 + len(body) + len(topic) + len(encode_properties(props))
    m = decode_record(raw)
    assert (m.topic, m.body, m.properties, m.queue_offset) == (topic, body, props, qoff)
    assert (m.queue_id, m.flag, m.commit_log_offset, m.reconsume_times) == (3, 7, 1000, 1)
    assert m.born_host == "10.1.2.3:5555" and m.store_host == "127.0.0.1:10911"
    assert m.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert read_head(raw).magic == MAGIC_V1


def test_named_offsets_find_the_fields_of_a_written_record():
    raw = _write(b"body!", "Topic", {"K": "v"}, queue_offset=42, sys_flag=4, prepared_transaction_offset=9)
    i32, i64 = struct.Struct(">i"), struct.Struct(">q")
    assert i32.unpack_from(raw, record.TOTAL_SIZE_AT)[0] == len(raw)
    assert i32.unpack_from(raw, record.MAGIC_AT)[0] == MAGIC_V1
    assert i32.unpack_from(raw, record.BODY_CRC_AT)[0] == zlib.crc32(b"body!") & 0x7FFFFFFF
    assert i32.unpack_from(raw, record.QUEUE_ID_AT)[0] == 3
    assert i32.unpack_from(raw, record.FLAG_AT)[0] == 7
    assert i64.unpack_from(raw, record.QUEUE_OFFSET_AT)[0] == 42
    assert i64.unpack_from(raw, record.PHYSICAL_OFFSET_AT)[0] == 1000
    assert i32.unpack_from(raw, record.SYSFLAG_AT)[0] == 4
    assert i64.unpack_from(raw, record.BORN_TIMESTAMP_AT)[0] == 111
    assert raw[record.BORN_HOST_AT : record.BORN_HOST_AT + record.HOST_V4_BYTES] == pack_host("10.1.2.3", 5555)
    assert i64.unpack_from(raw, record.STORE_TIMESTAMP_AT_V4)[0] == 222
    assert raw[record.STORE_HOST_AT_V4 : record.STORE_HOST_AT_V4 + 8] == pack_host("127.0.0.1", 10911)
    assert i32.unpack_from(raw, record.RECONSUME_TIMES_AT_V4)[0] == 1
    assert i64.unpack_from(raw, record.PREPARED_TRANSACTION_OFFSET_AT_V4)[0] == 9
    assert i32.unpack_from(raw, record.BODY_LENGTH_AT_V4)[0] == 5
    assert raw[record.BODY_AT_V4 : record.BODY_AT_V4 + 5] == b"body!"


def test_ipv6_hosts_set_flags_and_decode():
    raw = _write(b"x", host=("::1", 10911), born=("fe80::1", 1))
    m = decode_record(raw)
    assert m.store_host == "::1:10911" and m.born_host == "fe80::1:1"
    assert m.sys_flag & MessageSysFlag.STOREHOST_V6 and m.sys_flag & MessageSysFlag.BORNHOST_V6
    assert len(m.offset_msg_id) == 56


def test_compressed_body_inflates():
    body = b"abc" * 2000
    raw = _write(zlib.compress(body), sys_flag=MessageSysFlag.COMPRESSED)
    assert decode_record(raw).body == body
    assert decode_record(raw, decompress=False).body == zlib.compress(body)


def test_decode_records_back_to_back_and_garbage():
    a, b = _write(b"one", props={"UNIQ_KEY": "AB"}), _write(b"two")
    msgs = decode_records(a + b)
    assert [m.body for m in msgs] == [b"one", b"two"]
    assert msgs[0].msg_id == "AB" and msgs[1].msg_id == msgs[1].offset_msg_id
    with pytest.raises(DecodeError):
        decode_records(a + b[:-1])
    with pytest.raises(DecodeError):
        decode_records(a + b"\x00" * 40)


def test_offset_msg_id_round_trip():
    mid = create_offset_msg_id(pack_host("192.168.1.2", 10911), 123456789)
    assert len(mid) == 32 and mid == mid.upper()
    d = decode_offset_msg_id(mid)
    assert (d.host, d.port, d.physical_offset) == ("192.168.1.2", 10911, 123456789)
    with pytest.raises(DecodeError):
        decode_offset_msg_id("XYZ")


def test_uniq_ids_are_unique_and_well_formed():
    gen = UniqIdGenerator()
    ids = [gen.next_id() for _ in range(10000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_uniq_id_layout_is_ip_pid_random_time_counter():
    """RocketMQ's layout: 4 bytes IP, 2 pid, 4 random, 4 ms since the month began, 2 counter."""
    import time
    from datetime import datetime, timezone

    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x07", pid=0x1234)
    before = time.time_ns() // 1_000_000
    a, b = gen.next_id(), gen.next_id()
    after = time.time_ns() // 1_000_000
    assert a[:12] == b[:12] == "0A0000071234" and a[:20] == b[:20]
    assert (int(b[28:], 16) - int(a[28:], 16)) % 0x10000 == 1
    month = datetime.fromtimestamp(before / 1000, tz=timezone.utc).replace(day=1, hour=0, minute=0, second=0,
                                                                          microsecond=0)
    start = int(month.timestamp() * 1000)
    assert before - start <= int(a[20:28], 16) <= after - start
