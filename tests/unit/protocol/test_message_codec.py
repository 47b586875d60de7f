import itertools
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.common.limits import COMPRESS_BODY_OVER_BYTES, PROPERTIES_MAX_BYTES
from skiff.common.message import Message
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import pack_host, write_record
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.errors import MessageIllegalError
from skiff.protocol.message_codec import (
    MessageDecodeError,
    compress_body,
    decode_batch,
    decode_stored_messages,
    encode_batch,
    inflate,
    property_columns,
    send_properties,
)

prop_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"), max_size=8)
messages = st.builds(
    Message,
    st.just("T"),
    st.binary(max_size=64),
    st.dictionaries(prop_text.filter(bool), prop_text, max_size=4),
    st.integers(-(2**31), 2**31 - 1),
)


def with_wait(msg: Message) -> Message:
    return msg.with_properties(**{Prop.WAIT: msg.properties.get(Prop.WAIT, "true")})


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, min_size=1, max_size=6), st.booleans())
def test_batch_round_trips_plain_and_compressed(msgs, compress):
    body = encode_batch(msgs)
    if compress:
        body, flag = compress_body(body, 0, over_bytes=0)
        assert flag & MessageSysFlag.COMPRESSED
    assert decode_batch(body, "T", compressed=compress) == [with_wait(m) for m in msgs]


def test_batch_gives_each_message_its_own_uniq_key_and_the_java_layout():
    ids = (f"ID{i}" for i in itertools.count())
    body = encode_batch([Message("T", b"ab", {"TAGS": "x"}, 7), Message("T", b"", {}, 0)], lambda: next(ids))
    props0 = "TAGS\x01x\x02WAIT\x01true\x02UNIQ_KEY\x01ID0\x02".encode()
    first = 22 + 2 + len(props0)
    assert body[:first] == (first.to_bytes(4, "big") + bytes(8) + (7).to_bytes(4, "big") + (2).to_bytes(4, "big")
                            + b"ab" + len(props0).to_bytes(2, "big") + props0)
    assert [m.properties[Prop.UNIQ_KEY] for m in decode_batch(body, "T")] == ["ID0", "ID1"]


@pytest.mark.parametrize(
    "body, match",
    [
        (b"", "holds no message"),
        (b"\x00" * 21, "cut short"),
        ((22).to_bytes(4, "big") + bytes(12) + (5).to_bytes(4, "big") + b"\x00\x00", "body length 5 overruns"),
        ((22).to_bytes(4, "big") + bytes(12) + (-1).to_bytes(4, "big", signed=True) + b"\x00\x00", "body length -1"),
        ((22).to_bytes(4, "big") + bytes(16) + b"\x00\x09", "properties length 9 overruns"),
        ((22).to_bytes(4, "big") + bytes(16) + b"\xff\xff", "properties length -1"),
        ((30).to_bytes(4, "big") + bytes(16) + b"\x00\x00", "TOTALSIZE 30 is not its size 22"),
    ],
)
def test_malformed_batches_raise_message_decode_error(body, match):
    with pytest.raises(MessageDecodeError, match=match):
        decode_batch(body, "T")


def test_batch_message_count_is_bounded():
    body = encode_batch([Message("T", b"x")] * 5)
    assert len(decode_batch(body, "T", max_messages=5)) == 5
    with pytest.raises(MessageDecodeError, match="more than 4 messages"):
        decode_batch(body, "T", max_messages=4)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120), st.booleans())
def test_fuzz_batch_decoder_raises_only_decode_errors(data, compressed):
    try:
        decode_batch(data, "T", compressed=compressed)
    except MessageDecodeError:
        pass


def test_compression_threshold_and_zip_bomb_bound():
    small = b"a" * (COMPRESS_BODY_OVER_BYTES - 1)
    assert compress_body(small, 4) == (small, 4)
    big, flag = compress_body(small + b"a", 4)
    assert flag == 5 and zlib.decompress(big) == small + b"a"
    bomb = zlib.compress(bytes(1 << 20))
    assert len(inflate(bomb, max_bytes=1 << 20)) == 1 << 20
    with pytest.raises(MessageDecodeError, match="inflates to more than 1048575 bytes"):
        inflate(bomb, max_bytes=(1 << 20) - 1)
    with pytest.raises(MessageDecodeError, match="cut short"):
        inflate(bomb[:-8])
    with pytest.raises(MessageDecodeError, match="3 bytes follow"):
        inflate(bomb + b"xyz")
    with pytest.raises(MessageDecodeError, match="does not inflate"):
        inflate(b"not zlib")


def _records(*specs: tuple[bytes, int]) -> bytes:
    buf = bytearray(4096)
    pos = 0
    for i, (body, sys_flag) in enumerate(specs):
        pos += write_record(
            buf, pos, queue_id=1, flag=0, queue_offset=i, physical_offset=pos, sys_flag=sys_flag,
            born_timestamp=1, born_host=pack_host("10.0.0.1", 5000), store_timestamp=2,
            store_host=pack_host("127.0.0.1", 10911), reconsume_times=0, prepared_transaction_offset=0,
            body=body, topic=b"T", properties=b"TAGS\x01a\x02",
        )
    return bytes(buf[:pos])


def test_stored_messages_are_inflated_within_bounds():
    packed = zlib.compress(b"hello" * 100)
    msgs = decode_stored_messages(_records((b"plain", 0), (packed, MessageSysFlag.COMPRESSED)))
    assert [m.body for m in msgs] == [b"plain", b"hello" * 100]
    assert [m.queue_offset for m in msgs] == [0, 1] and msgs[1].sys_flag & MessageSysFlag.COMPRESSED
    assert msgs[0].store_host == "127.0.0.1:10911" and msgs[0].tags == "a"
    with pytest.raises(MessageDecodeError, match="more than 100 bytes"):
        decode_stored_messages(_records((packed, MessageSysFlag.COMPRESSED)), max_body_bytes=100)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 150))
def test_fuzz_stored_decoder_raises_only_decode_errors(noise, cut):
    good = _records((b"abc", 0), (zlib.compress(b"x" * 50), 1))
    for data in (noise, good[:cut] + noise, good[:cut]):
        try:
            decode_stored_messages(data)
        except DecodeError:
            pass


def test_send_properties_add_wait_and_uniq_key_without_overriding():
    msg = Message.of("T", b"x", tags="A", keys=["k1", "k2"])
    assert decode_properties(send_properties(msg, "U1")) == {"TAGS": "A", "KEYS": "k1 k2", "WAIT": "true",
                                                            "UNIQ_KEY": "U1"}
    own = msg.with_properties(WAIT="false", UNIQ_KEY="MINE")
    assert decode_properties(send_properties(own, "U2")) == {**own.properties}
    assert Prop.UNIQ_KEY not in decode_properties(send_properties(msg))


@pytest.mark.parametrize(
    "props, match",
    [
        ({"A\x01": "v"}, "separator"),
        ({"A": "v\x02"}, "separator"),
        ({"": "v"}, "empty name"),
        ({"BIG": "x" * PROPERTIES_MAX_BYTES}, "more than the 32767 allowed"),
    ],
)
def test_send_properties_refuse_what_cannot_be_encoded(props, match):
    with pytest.raises(MessageIllegalError, match=match):
        send_properties(Message("T", b"", props))


raw_pair = st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "", "\x01"]),
                     st.one_of(st.text(alphabet="ab \xff", max_size=4), st.text(alphabet="a\x01\x02", max_size=3)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(raw_pair, max_size=4), min_size=1, max_size=5), st.booleans(), st.booleans())
def test_property_columns_read_what_decode_properties_reads(pair_lists, same_names, trailing):
    """The broker reads a batch's indexed properties as columns when every message has the
    same names in the same order; whatever it reads must be what the per-message decoder
    reads, and any batch it cannot read so is handed back (None), never misread."""
    if same_names:
        names = [n for n, _ in pair_lists[0]]
        pair_lists = [[(n, v) for n, (_, v) in zip(names, itertools.cycle(p or [("", "")]))] for p in pair_lists]
    raws = [b"".join(f"{n}\x01{v}\x02".encode() for n, v in pairs)[: None if trailing else -1] for pairs in pair_lists]
    columns = property_columns(raws)
    decoded = [decode_properties(r) for r in raws]
    if columns is None:
        return
    assert {n for d in decoded for n in d} <= set(columns.names)
    for name in {*columns.names, "TAGS", "absent"}:
        assert columns.values(name) == [d.get(name) for d in decoded], name


def test_property_columns_take_the_common_batch():
    raws = [f"TAGS\x01t{i}\x02KEYS\x01k{i} x\x02UNIQ_KEY\x01U{i}\x02".encode() for i in range(3)]
    columns = property_columns(raws)
    assert columns is not None and columns.names == ["TAGS", "KEYS", "UNIQ_KEY"]
    assert columns.values("KEYS") == ["k0 x", "k1 x", "k2 x"]
    assert property_columns([raws[0], b"KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01u\x02", raws[2]]) is None
