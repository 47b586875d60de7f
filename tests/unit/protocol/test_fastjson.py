import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.protocol.fastjson import MAX_DEPTH, JsonDecodeError, ObjectKey, dumps, loads, parse_lenient

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
standard_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150)
@given(standard_json, st.booleans())
def test_lenient_parser_agrees_with_orjson_on_standard_json(value, indent):
    raw = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0)
    assert parse_lenient(raw) == orjson.loads(raw)
    assert loads(raw) == orjson.loads(raw)


mq_keys = st.builds(lambda t, b, q: ObjectKey.of({"brokerName": b, "queueId": q, "topic": t}),
                    text, text, st.integers(0, 1000))
java_maps = st.dictionaries(st.integers(-5, 2**40) | mq_keys | text, standard_json, max_size=3)


@settings(max_examples=100)
@given(st.dictionaries(text, java_maps, max_size=3))
def test_fastjson_form_round_trips(value):
    assert loads(dumps(value)) == value


def test_java_forms_parse():
    assert loads(b'{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"}}') == {
        "brokerAddrs": {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}}
    got = loads(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5}}}')
    ((key, val),) = got["offsetTable"].items()
    assert key == ObjectKey((("brokerName", "b"), ("queueId", 0), ("topic", "T")))
    assert key.as_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"} and val == {"brokerOffset": 5}


def test_dumps_writes_java_form_only_when_needed():
    assert dumps({"a": [1, {"b": None}]}) == b'{"a":[1,{"b":null}]}'
    assert dumps({0: "x", "s": {-3: 1}}) == b'{0:"x","s":{-3:1}}'
    key = ObjectKey.of({"brokerName": "b", "queueId": 0, "topic": "T", "nested": {"x": [1, 2]}})
    assert dumps({key: 1}) == b'{{"brokerName":"b","queueId":0,"topic":"T","nested":{"x":[1,2]}}:1}'
    with pytest.raises(TypeError, match="map key cannot be a float"):
        dumps({1.5: 1, 0: 2})


@pytest.mark.parametrize(
    "raw",
    [b"", b" ", b"{", b"}", b"[1,]", b"[1 2]", b'{"a"}', b'{"a":}', b"{1:}", b"{true:1}", b"nul", b"01",
     b'"\\x"', b'"abc', b"\xff\xfe", b"{} {}", b"-", b"1.", b".5", b'{"a":1,}', b"[" * (MAX_DEPTH + 1)],
)
def test_malformed_json_raises_json_decode_error(raw):
    with pytest.raises(JsonDecodeError):
        loads(raw)


@settings(max_examples=500)
@given(st.binary(max_size=60) | st.text(alphabet='{}[]:,"0123456789-.eEtrufalsn \\', max_size=60).map(str.encode))
def test_fuzz_lenient_parser_raises_only_json_decode_error(data):
    try:
        parse_lenient(data)
    except JsonDecodeError:
        pass
