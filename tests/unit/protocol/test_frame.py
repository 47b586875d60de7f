import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.protocol.codes import SerializeType
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, FrameError, encode_frame_bytes

ext = st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=20), max_size=6)


@settings(max_examples=200)
@given(
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(0, 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), st.text(min_size=1, max_size=30)),
    ext_fields=st.one_of(st.none(), ext),
    body=st.binary(max_size=200),
    ser=st.sampled_from(list(SerializeType)),
)
def test_frame_round_trip_both_serializations(code, opaque, flag, remark, ext_fields, body, ser):
    cmd = RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext_fields,
                          body=body, serialize_type=ser)
    raw = encode_frame_bytes(cmd)
    dec = FrameDecoder()
    # byte by byte for the first frame, then a second frame in one go
    out = []
    for i in range(len(raw)):
        out += dec.feed(raw[i : i + 1])
    out += dec.feed(raw)
    assert len(out) == 2 and dec.buffered == 0
    for got in out:
        assert (got.code, got.opaque, got.flag, got.body, got.serialize_type) == (code, opaque, flag, body, ser)
        assert got.remark == remark
        assert (got.ext_fields or None) == (ext_fields or None)


def test_cpp_style_header_numbers_and_newline_are_accepted():
    header = orjson.dumps({"code": 11, "language": "CPP", "version": 63, "opaque": 5, "flag": 0,
                           "remark": "", "extFields": {"queueId": 3, "queueOffset": "120", "batch": True}}) + b"\n"
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.ext_fields == {"queueId": "3", "queueOffset": "120", "batch": "true"}
    assert cmd.language == "CPP" and cmd.serialize_type == SerializeType.JSON


def test_response_is_json_with_string_ext_and_request_serialization():
    req = RemotingCommand(code=10, opaque=9, serialize_type=SerializeType.JSON)
    resp = req.response(0, ext_fields={"queueOffset": 17, "ok": True})
    raw = encode_frame_bytes(resp)
    assert struct.unpack_from(">i", raw, 4)[0] >> 24 == 0
    header = orjson.loads(raw[8:])
    assert header["extFields"] == {"queueOffset": "17", "ok": "true"} and header["flag"] == 1


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">i", 2) + b"xx",
        struct.pack(">i", 17 * 1024 * 1024),
        struct.pack(">ii", 8, 100) + b"abcd",
        struct.pack(">ii", 9, 5) + b"notjs",
        struct.pack(">ii", 9, (7 << 24) | 5) + b"{}{}{",
        struct.pack(">ii", 6, 2) + b"[]",
    ],
)
def test_malformed_frames_raise_frame_error(raw):
    with pytest.raises(FrameError):
        FrameDecoder().feed(raw)


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_fuzz_decoder_only_raises_frame_error(data):
    dec = FrameDecoder(max_frame_bytes=1 << 20)
    try:
        dec.feed(data)
    except FrameError:
        pass
