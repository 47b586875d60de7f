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
    assert reader.read(raw) == expected
    assert reader.read(bytearray(raw)) == expected
    assert reader.read(memoryview(raw)) == expected


def test_reader_examples():
    reader = PropertyReader(["TAGS", "a"])
    assert reader.names == ("TAGS", "a")
    assert reader.read(b"TAGS\x01t\x02a\x011\x02") == {"TAGS": "t", "a": "1"}
    assert reader.read(b"a\x011\x02a\x012\x02") == {"a": "2"}
    assert reader.read(b"a\x011\x02a\x012\x01x\x02") == {"a": "1"}  # last pair malformed
    assert reader.read(b"ba\x011\x02") == {}
    assert reader.read(b"a\x01\xc3\xa9") == {"a": "é"}
