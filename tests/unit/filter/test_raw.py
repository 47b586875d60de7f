"""Reading named properties from raw bytes agrees with decoding them all."""

from hypothesis import given, settings

from skiff.common.properties import decode_properties
from skiff.filter.raw import PropertyReader

from tests.unit.filter.strategies import NAMES, raw_properties


@settings(max_examples=300, deadline=None)
@given(raw_properties)
def test_reader_agrees_with_decode_properties(raw):
    decoded = decode_properties(raw)
    expected = {n: decoded[n] for n in NAMES if n in decoded}
    reader = PropertyReader(NAMES)
    for form in (raw, bytearray(raw), memoryview(raw)):
        assert read_all(reader, form) == expected
        view = reader.view(form)
        assert [n in view for n in NAMES] == [n in decoded for n in NAMES]


def read_all(reader, raw):
    view = reader.view(raw)
    return {n: view.get(n) for n in reader.names if view.get(n) is not None}


def test_reader_examples():
    reader = PropertyReader(["TAGS", "a"])
    assert reader.names == ("TAGS", "a")
    assert read_all(reader, b"TAGS\x01t\x02a\x011\x02") == {"TAGS": "t", "a": "1"}
    assert read_all(reader, b"a\x011\x02a\x012\x02") == {"a": "2"}
    assert read_all(reader, b"a\x011\x02a\x012\x01x\x02") == {"a": "1"}  # last pair malformed
    assert read_all(reader, b"ba\x011\x02") == {}
    assert read_all(reader, b"a\x01\xc3\xa9") == {"a": "é"}
    assert reader.view(b"a\x01\x02").get("TAGS", "none") == "none"
