from dataclasses import dataclass

import pytest

from skiff.protocol.headers.base import Header, HeaderError


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
