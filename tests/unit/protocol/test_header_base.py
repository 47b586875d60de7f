from dataclasses import dataclass

import pytest

from skiff.protocol.headers.base import Header, HeaderError, Int32


@dataclass(frozen=True, slots=True)
class Demo(Header):
    WIRE_NAMES = {"producer_group": "a"}
    producer_group: str
    queue_id: int
    batch: bool = False
    remark_text: str | None = None


def test_parse_numbers_strings_and_cpp_booleans():
    h = Demo.from_ext({"a": "PG", "queueId": "3", "batch": "1"})
    assert h == Demo("PG", 3, True, None)
    assert Demo.from_ext({"a": "PG", "queueId": "3", "batch": "false"}).batch is False
    assert h.to_ext() == {"a": "PG", "queueId": "3", "batch": "true"}


def test_missing_and_bad_fields_name_the_wire_key():
    with pytest.raises(HeaderError, match="queueId"):
        Demo.from_ext({"a": "PG"})
    with pytest.raises(HeaderError, match="queueId='x'"):
        Demo.from_ext({"a": "PG", "queueId": "x"})
    with pytest.raises(HeaderError, match="batch"):
        Demo.from_ext({"a": "PG", "queueId": "1", "batch": "maybe"})


@dataclass(frozen=True, slots=True)
class Ranged(Header):
    queue_id: Int32
    offset: int
    note: str | None = None
    count: Int32 | None = None


@pytest.mark.parametrize(
    "ext",
    [
        {"queueId": str(2**31), "offset": "0"},
        {"queueId": "0", "offset": str(2**63)},
        {"queueId": "1e400", "offset": "0"},
        {"queueId": "1.0e400", "offset": "0"},
        {"queueId": "nan", "offset": "0"},
        {"queueId": "0", "offset": "0", "count": "x"},
    ],
)
def test_out_of_range_and_non_numbers_are_header_errors(ext):
    with pytest.raises(HeaderError, match="is not valid"):
        Ranged.from_ext(ext)


def test_java_integer_and_long_bounds_are_accepted():
    h = Ranged.from_ext({"queueId": str(-(2**31)), "offset": str(2**63 - 1), "count": str(2**31 - 1)})
    assert (h.queue_id, h.offset, h.count) == (-(2**31), 2**63 - 1, 2**31 - 1)


def test_numbers_written_as_floats_by_a_json_writer_parse_as_ints():
    assert Ranged.from_ext({"queueId": "3.0", "offset": "12"}).queue_id == 3


def test_empty_optional_values_read_as_absent():
    assert Ranged.from_ext({"queueId": "1", "offset": "2", "note": "", "count": ""}) == Ranged(1, 2)
    assert Ranged(1, 2).to_ext() == {"queueId": "1", "offset": "2"}


def test_absent_ext_fields_report_the_first_required_field():
    with pytest.raises(HeaderError, match="no queueId"):
        Ranged.from_ext(None)


@dataclass(frozen=True, slots=True)
class Extended(Ranged):
    extra: str = "x"


def test_a_subclass_gets_its_own_codec_after_the_parent_compiled_one():
    assert Ranged.from_ext({"queueId": "1", "offset": "2"}) == Ranged(1, 2)
    got = Extended.from_ext({"queueId": "1", "offset": "2", "extra": "y"})
    assert type(got) is Extended and got.extra == "y"
    assert got.to_ext() == {"queueId": "1", "offset": "2", "extra": "y"}
    assert Ranged.wire_names() == ("queueId", "offset", "note", "count")


@dataclass(frozen=True, slots=True)
class Late(Header):
    offset: int


def test_a_method_bound_before_the_first_call_stays_fast_and_right():
    bound_to_ext = Late(5).to_ext
    parse = Late.from_ext
    assert bound_to_ext() == {"offset": "5"} and parse({"offset": "6"}) == Late(6)
    assert bound_to_ext() == {"offset": "5"} and parse({"offset": "7"}) == Late(7)
    assert Late.to_ext is not Header.to_ext and "from_ext" in Late.__dict__
