import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from skiff.common.config import snake_to_camel
from skiff.protocol.codes import RequestCode, SerializeType
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes
from skiff.protocol.headers.base import Header, HeaderError
from skiff.protocol.headers.by_code import REQUEST_HEADERS, RESPONSE_HEADERS
from skiff.protocol.headers.send import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    decode_send_request,
    send_fields_py,
)
from tests.unit.protocol.strategies import header_strategy

HEADER_CLASSES = sorted({*REQUEST_HEADERS.values(), *RESPONSE_HEADERS.values()}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data(), serialize=st.sampled_from(list(SerializeType)))
def test_every_header_round_trips_through_a_frame(cls, data, serialize):
    header = data.draw(header_strategy(cls))
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
    cmd.serialize_type = serialize
    (got,) = FrameDecoder().feed(encode_frame_bytes(cmd))
    assert cls.from_ext(got.ext_fields) == header
    assert all(isinstance(v, str) for v in header.to_ext().values())


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_required_fields_are_named_when_missing(cls):
    required = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    wires = dict(zip([f.name for f in dataclasses.fields(cls)], cls.wire_names()))
    for f in required:
        ext = {w: "1" for w in cls.wire_names() if w != wires[f.name]}
        with pytest.raises(HeaderError, match=f"no {wires[f.name]}$"):
            cls.from_ext(ext)


@settings(max_examples=100)
@given(header_strategy(SendMessageRequestHeader))
def test_send_v2_converts_to_v1_and_back(v1):
    v2 = SendMessageRequestHeaderV2.from_v1(v1)
    assert v2.to_v1() == v1
    assert set(v2.to_ext()) <= set("abcdefghijklmn")
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        got = decode_send_request(code, v2.to_ext())
        assert isinstance(got, SendMessageRequestHeader) and got.to_v1() == v1
    assert decode_send_request(RequestCode.SEND_MESSAGE, v1.to_ext()) == v1
    assert type(v2.to_v1()) is SendMessageRequestHeader


def test_v2_keys_follow_java_order_and_meaning():
    v1 = SendMessageRequestHeader("PG", "T", "TBW102", 4, 3, 1, 17, 9, "p", 2, True, True, 16, "broker-a")
    assert SendMessageRequestHeaderV2.from_v1(v1).to_ext() == {
        "a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "1", "g": "17", "h": "9",
        "i": "p", "j": "2", "k": "true", "l": "16", "m": "true", "n": "broker-a",
    }


def test_header_classes_are_frozen_slotted_dataclasses():
    for cls in HEADER_CLASSES:
        assert issubclass(cls, Header) and dataclasses.is_dataclass(cls)
        assert cls.__dataclass_params__.frozen and "__slots__" in cls.__dict__, cls


# -- send_fields: the single-send path's direct read of a send header ---------------------------

_SEND_VALUES = st.one_of(st.none(), st.sampled_from(["", "0", "1", "-1", "7", "true", "false", "TRUE", " 3", "1.5",
                                                     "2147483648", "-2147483649", "9223372036854775808", "x", "nan",
                                                     "1_0", "\u0663"]), st.text(max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]),
       st.lists(_SEND_VALUES, min_size=14, max_size=14), st.booleans())
def test_send_fields_read_what_decode_send_request_reads(code: int, values: list[str | None], plain: bool) -> None:
    """Equal to the header decode where it answers, None wherever the decode refuses the header;
    the compiled twin (where built) gives what the reference gives."""
    names = (SendMessageRequestHeaderV2.WIRE_NAMES.values() if code != RequestCode.SEND_MESSAGE
             else [snake_to_camel(f.name) for f in dataclasses.fields(SendMessageRequestHeader)])
    if plain:  # a header as clients send it, with one field at random changed
        base = ["PG", "T", "TBW102", "4", "1", "0", "1700000000000", "0", "A\x01b\x02", "", "false", "false", None, None]
        k = len(values[0] or "") % 14
        values = base[:k] + values[k:k + 1] + base[k + 1:]
    ext = {name: v for name, v in zip(names, values) if v is not None}
    fast = send_fields_py(code, ext)
    twin = kernels.compiled("send_fields", "skiff.protocol._frames")
    if twin is not None and not kernels.DISABLED:
        assert twin(code, ext) == fast
    try:
        h = decode_send_request(code, ext)
    except HeaderError:
        assert fast is None
        return
    if fast is not None:
        assert fast == (h.topic, h.queue_id, h.properties or "", h.flag, h.sys_flag, h.born_timestamp,
                        h.reconsume_times or 0, h.batch, h.default_topic, h.default_topic_queue_nums)
