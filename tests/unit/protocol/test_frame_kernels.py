"""The compiled frame codec (skiff.protocol._frames) decodes and encodes exactly as the
pure-Python reference does, on random request streams: the same commands (fields, ext
order, body) from the same bytes however they are split into reads, the same FrameError
for the same bad bytes, and byte-for-byte the same encoded headers; its batch-body kernels
(`pack_batch`, `split_batch`) give what `skiff.protocol.message_codec`'s references give."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from skiff.common.message import Message
from skiff.protocol import frame
from skiff.protocol.codes import RequestCode, ResponseCode, SerializeType
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, FrameError, encode_frame_bytes, json_frames_py, json_head_py
from skiff.protocol.headers.send import SendMessageRequestHeader, SendMessageRequestHeaderV2
from skiff.protocol.message_codec import (
    encode_bare_batch,
    encode_batch,
    pack_bare_batch_py,
    pack_batch_py,
    send_properties,
    split_batch_py,
)
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=80, deadline=None)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=14)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
FRAMES = "skiff.protocol._frames"


compiled = compiled_kernels(FRAMES)


@contextlib.contextmanager
def reference_decoder() -> Iterator[None]:
    """FrameDecoder on the pure-Python path while inside."""
    saved = frame._json_frames
    frame._json_frames = json_frames_py
    try:
        yield
    finally:
        frame._json_frames = saved


def send_frame(i: int, topic: str, body: bytes, v2: bool) -> bytes:
    """A send as our client writes it (V2 one-letter keys, properties with \\x01 \\x02)."""
    props = send_properties(Message.of(topic or "T", body, keys=f"k{i}", tags="t"), f"{i:032X}")
    header = SendMessageRequestHeader("PG", topic or "T", "TBW102", 4, i % 4, 0, 1_700_000_000_000 + i, 0, props)
    code = RequestCode.SEND_MESSAGE_V2 if v2 else RequestCode.SEND_MESSAGE
    ext = (SendMessageRequestHeaderV2.from_v1(header) if v2 else header).to_ext()
    cmd = RemotingCommand.request(code, ext, body)
    cmd.opaque = i
    return encode_frame_bytes(cmd)


json_value = st.one_of(TEXT, INT, st.booleans(), st.none(), st.floats(allow_nan=False, width=32),
                       st.lists(st.integers(0, 9), max_size=2))
header_dicts = st.fixed_dictionaries(
    {"code": st.one_of(INT, st.sampled_from(["310", True, 1.5])), "opaque": INT, "flag": st.integers(0, 3)},
    optional={"language": st.one_of(TEXT, st.integers(0, 12)), "version": INT, "remark": st.one_of(TEXT, st.none(), INT),
              "extFields": st.one_of(st.none(), st.dictionaries(TEXT, json_value, max_size=6)),
              "serializeTypeCurrentRPC": st.just("JSON"), "other": json_value})


@st.composite
def frames(draw: Any) -> bytes:
    """One frame of any kind a peer may send: our client's sends, any JSON header (numbers,
    booleans, nulls, floats and lists where strings are expected, whitespace, escapes),
    ROCKETMQ binary headers, and broken ones."""
    kind = draw(st.sampled_from(["send", "json", "pretty", "rocketmq", "broken"]))
    body = draw(st.binary(max_size=40))
    if kind == "send":
        return send_frame(draw(st.integers(0, 1000)), draw(TEXT), body, draw(st.booleans()))
    if kind == "rocketmq":
        cmd = RemotingCommand(code=draw(st.integers(0, 400)), opaque=draw(st.integers(0, 2**31 - 1)),
                              ext_fields=draw(st.dictionaries(TEXT, TEXT, max_size=4)), body=body,
                              serialize_type=SerializeType.ROCKETMQ)
        return encode_frame_bytes(cmd)
    header = orjson.dumps(draw(header_dicts), option=orjson.OPT_INDENT_2 if kind == "pretty" else 0)
    if kind == "pretty":
        header = b" \r\n\t" + header + b"\n "
    if kind == "broken":
        cut = draw(st.integers(0, len(header)))
        header = header[:cut] + draw(st.binary(max_size=4)) + header[cut + 1:]
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def decode(data: bytes, cuts: list[int]) -> tuple[list[tuple[Any, ...]], str | None, int]:
    """Commands (every field, ext in its order), the FrameError if one, and what stays buffered."""
    dec = FrameDecoder(1 << 20)
    out: list[RemotingCommand] = []
    error = None
    try:
        start = 0
        for cut in sorted(cuts) + [len(data)]:
            out += dec.feed(data[start:cut])
            start = max(start, cut)
    except FrameError as exc:
        error = str(exc)
    return [(c.code, c.opaque, c.flag, None if c.ext_fields is None else list(c.ext_fields.items()), c.remark,
             bytes(c.body), c.language, c.version, c.serialize_type) for c in out], error, dec.buffered


@SETTINGS
@given(st.lists(frames(), min_size=1, max_size=8), st.lists(st.integers(0, 4000), max_size=4))
def test_decoding_a_stream_equals_the_reference(stream: list[bytes], cuts: list[int]) -> None:
    compiled("json_frames")
    data = b"".join(stream)
    cuts = [c % (len(data) + 1) for c in cuts]
    fast = decode(data, cuts)
    with reference_decoder():
        reference = decode(data, cuts)
    assert fast == reference


def test_a_read_of_sends_is_decoded_by_the_kernel_alone() -> None:
    kernel = compiled("json_frames")
    data = b"".join(send_frame(i, "Topic", b"x" * 100, i % 2 == 0) for i in range(64))
    commands, pos = kernel(data, 0, 1 << 20, RemotingCommand, SerializeType.JSON)
    assert pos == len(data) and [c.opaque for c in commands] == list(range(64))
    assert commands[1].ext_fields["topic"] == "Topic" and "\x01" in commands[0].ext_fields["i"]


def test_lone_sends_each_in_its_own_read_decode_as_the_reference() -> None:
    """What the kernel learnt of one read's fields serves the next read only where the bytes
    are equal: a buffer overwritten in place with a topic of the same length (the same
    address, other bytes) decodes to the new topic, and lone sends read one by one give the
    reference's commands."""
    kernel = compiled("json_frames")
    buf = bytearray(send_frame(0, "TopicA", b"x", True))
    first, _ = kernel(buf, 0, 1 << 20, RemotingCommand, SerializeType.JSON)
    buf[:] = send_frame(0, "TopicB", b"x", True)
    second, pos = kernel(buf, 0, 1 << 20, RemotingCommand, SerializeType.JSON)
    assert pos == len(buf) and first[0].ext_fields["b"] == "TopicA" and second[0].ext_fields["b"] == "TopicB"
    lone = [send_frame(i, "T" if i % 3 else "Other", b"y" * i, i % 2 == 0) for i in range(24)]
    fast = [decode(one, []) for one in lone]
    with reference_decoder():
        assert fast == [decode(one, []) for one in lone]


def test_commands_of_another_layout_are_made_by_calling_the_class() -> None:
    """The kernel sets a command's slots directly only for RemotingCommand's exact slotted
    layout; a class of the same fields without slots (or with a field more) is called, and
    both give the same commands."""
    kernel = compiled("json_frames")
    data = b"".join(send_frame(i, "Topic", b"x" * 10, i % 2 == 0) for i in range(8))

    @dataclasses.dataclass
    class Unslotted:
        code: int
        opaque: int = 0
        flag: int = 0
        ext_fields: dict[str, str] | None = None
        remark: str | None = None
        body: bytes = b""
        language: str = "PYTHON"
        version: int = 0
        serialize_type: SerializeType = SerializeType.JSON
        body_parts: object = None
        made: bool = True

    SlottedMore = dataclasses.dataclass(slots=True)(type("SlottedMore", (), {
        "__annotations__": dict(Unslotted.__annotations__),
        **{f.name: f.default for f in dataclasses.fields(Unslotted)}}))

    slotted, _ = kernel(data, 0, 1 << 20, RemotingCommand, SerializeType.JSON)
    for other in (Unslotted, SlottedMore):
        called, _ = kernel(data, 0, 1 << 20, other, SerializeType.JSON)
        assert all(type(c) is other and c.made for c in called)  # type: ignore[attr-defined]
        assert [dataclasses.astuple(c)[:10] for c in called] == [dataclasses.astuple(c) for c in slotted]
    again, _ = kernel(data, 0, 1 << 20, RemotingCommand, SerializeType.JSON)
    assert again == slotted and all(type(c) is RemotingCommand for c in again)
    assert all(c.body_parts is None and c.serialize_type is SerializeType.JSON for c in slotted)


@SETTINGS
@given(code=INT, language=TEXT, version=INT, opaque=INT, flag=INT, remark=st.one_of(st.none(), TEXT),
       ext=st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=6)), body_len=st.integers(0, 1 << 20))
def test_encoded_json_heads_equal_the_reference(code: int, language: str, version: int, opaque: int, flag: int,
                                                remark: str | None, ext: dict[str, str] | None, body_len: int) -> None:
    kernel = compiled("json_head")
    args = (0, code, language, version, opaque, flag, remark, ext, body_len)
    assert kernel(*args) == json_head_py(*args)
    answer = (0, ResponseCode.FLUSH_DISK_TIMEOUT, language, version, opaque, 1, remark, ext, body_len)
    assert kernel(*answer) == json_head_py(*answer)  # a response's code is an IntEnum


def test_the_head_kernel_leaves_what_it_does_not_encode_to_the_reference() -> None:
    kernel = compiled("json_head")
    assert kernel(0, 10, "JAVA", 1, 2, 1, None, {"queueOffset": 17}, 0) is None  # a non-str ext value
    assert kernel(0, 10, "JAVA", 1, 2**64, 1, None, None, 0) is None
    assert kernel(0, True, "JAVA", 1, 2, 1, None, None, 0) is None  # orjson writes a bool as true
    assert kernel(0, 10, "JAVA", 1, 2, 1, "\ud800", None, 0) is None  # a lone surrogate
    cmd = RemotingCommand(code=0, opaque=3, flag=1, ext_fields={"queueOffset": 17, "ok": True})  # type: ignore[dict-item]
    assert orjson.loads(encode_frame_bytes(cmd)[8:])["extFields"] == {"queueOffset": "17", "ok": "true"}


def test_each_frame_reference_has_its_compiled_twin_when_built() -> None:
    if kernels.compiled("json_frames", FRAMES) is None:
        pytest.skip("the compiled kernels are not built here")
    assert all(callable(kernels.compiled(n, FRAMES)) for n in ("json_frames", "json_head", "send_fields",
                                                                    "pack_batch", "split_batch",
                                                                    "pack_bare_batch"))


BATCH_SETTINGS = settings(max_examples=60, deadline=None)
messages = st.lists(st.tuples(st.binary(max_size=64), st.dictionaries(st.sampled_from(["KEYS", "TAGS", "a"]),
                                                                      st.text("xy", min_size=1, max_size=4)),
                              INT32), min_size=1, max_size=8)


@BATCH_SETTINGS
@given(batch=messages, cut=st.integers(0, 40), junk=st.binary(max_size=30), max_messages=st.integers(1, 10))
def test_split_batch_is_identical_on_good_cut_and_damaged_bodies(batch: list[Any], cut: int, junk: bytes,
                                                                  max_messages: int) -> None:
    kernel = compiled("split_batch")
    body = encode_batch([Message("T", b, p, f) for b, p, f in batch])
    for data in (body, body[: max(0, len(body) - cut)], body + junk, junk + body, bytearray(body)):
        got = kernel(data, max_messages)
        assert got == split_batch_py(data, max_messages)
        assert all(type(part) is type(data) for part in got[1] + got[2])  # bytes built directly, or slices


@BATCH_SETTINGS
@given(batch=messages, props=st.lists(st.binary(max_size=40), min_size=8, max_size=8))
def test_pack_batch_is_identical(batch: list[Any], props: list[bytes]) -> None:
    msgs = [Message("T", b, p, f) for b, p, f in batch]
    assert compiled("pack_batch")(msgs, props) == pack_batch_py(msgs, props)


@BATCH_SETTINGS
@given(bodies=st.lists(st.tuples(st.binary(max_size=64), INT32), max_size=8), first=st.integers(0, 2**20),
       prefix=st.text("0A9Fé", max_size=28), head=st.text("WAIT\x01\x02é", max_size=12))
def test_pack_bare_batch_is_identical(bodies: list[Any], first: int, prefix: str, head: str) -> None:
    msgs = [Message("T", b, {}, f) for b, f in bodies]
    counters = list(range(first, first + len(msgs)))  # past 65,535 too: only the low 16 bits are written
    got = compiled("pack_bare_batch")(msgs, head, prefix, counters)
    assert got == pack_bare_batch_py(msgs, head, prefix, counters)
    assert type(got[1]) is str


def test_a_bare_batch_is_the_batch_of_its_messages_with_their_ids() -> None:
    msgs = [Message("T", bytes([i]) * i, {}, i) for i in range(1, 5)]
    body, ids = encode_bare_batch(msgs, "0A00000100070000CAFE00001234", [65534, 65535, 65536, 65537])
    assert ids.split(",") == [f"0A00000100070000CAFE00001234{c}" for c in ("FFFE", "FFFF", "0000", "0001")]
    assert body == encode_batch(msgs, iter(ids.split(",")).__next__)
