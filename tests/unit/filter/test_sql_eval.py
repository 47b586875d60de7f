"""SQL92 evaluation, table-driven: RocketMQ's own filter test cases (rocketmq-filter
`ExpressionTest`, 4.9.x, and the 5.x CONTAINS cases) plus Skiff's documented rules."""

import pytest

from skiff.common.properties import encode_properties
from skiff.filter import SqlFilter

ROCKETMQ_CASES = [
    # (expression, properties, matches)
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    ("a=3 and b<>4 And c>5 AND d<=4", {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "3"}, True),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "5"}, True),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "6"}, True),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "3", "d": "2"}, True),
    ("a=3 or b<>4 Or c>5 OR d<=4", {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    ("a in ('3', '4', '5')", {"a": "3"}, True),
    ("a in ('3', '4', '5')", {"a": "5"}, True),
    ("a in ('3', '4', '5')", {"a": "8"}, False),
    ("a not in ('3', '4', '5')", {"a": "8"}, True),
    ("a not in ('3', '4', '5')", {"a": "4"}, False),
    ("a between 2 and 10", {"a": "2"}, True),
    ("a between 2 and 10", {"a": "10"}, True),
    ("a between 2 and 10", {"a": "3"}, True),
    ("a between 2 and 10", {"a": "1"}, False),
    ("a between 2 and 10", {"a": "11"}, False),
    ("a not between 2 and 10", {"a": "1"}, True),
    ("a not between 2 and 10", {"a": "11"}, True),
    ("a not between 2 and 10", {"a": "2"}, False),
    ("a not between 2 and 10", {"a": "3"}, False),
    ("a is null", {"abc": "2"}, True),
    ("a is null", {"a": "2"}, False),
    ("a is not null", {"a": "2"}, True),
    ("a is not null", {"abc": "2"}, False),
    ("a is not null and a='hello'", {"a": "hello"}, True),
    ("a is not null and a='hello'", {}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a is null OR a='hello'", {}, True),
    ("a is null OR a='hello'", {"a": "hello"}, True),
    ("a is null OR a='hello'", {"a": "abc"}, False),
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    ("a > 3.1E10", {"a": str(3.1415 * 10**10)}, True),
    ("a > 3.14", {"a": "3.1415"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a > b", {"a": "20", "b": "10"}, True),
    ("a=b", {"a": "3.14", "b": "3.14"}, True),
    ("a<>b", {"a": "3.14", "b": "3.14"}, False),
    ("a<>b", {"a": "3.14", "b": "3.141"}, True),
    ("a between up and low", {"a": "3.14"}, False),
    ("a between up and low", {"a": "3.14", "up": "up", "low": "low"}, False),
    ("key is not null and key between 0 and 100", {"key": "con"}, False),
    ("a between 0 and 100", {"a": "abc"}, False),
    ("a <= now", {"a": "5", "now": "6"}, True),  # 'now' is just a property name
    # RocketMQ 5.x string tests
    ("value contains 'x'", {"value": "axb"}, True),
    ("value startswith 'ax'", {"value": "axb"}, True),
    ("value endswith 'xb'", {"value": "axb"}, True),
    ("value not contains 'x'", {"value": "axb"}, False),
    ("value not startswith 'ax'", {"value": "axb"}, False),
    ("value not endswith 'xb'", {"value": "axb"}, False),
    ("value contains 'x'", {"value": "abb"}, False),
    ("value not contains 'x'", {"value": "abb"}, True),
    ("value not startswith 'x'", {"value": "abb"}, True),
    ("value not endswith 'x'", {"value": "abb"}, True),
    ("value contains ''", {"value": "axb"}, False),
    ("value not contains ''", {"value": "axb"}, False),
    ("value contains 'x'", {}, False),
    ("value not contains 'x'", {}, False),
    ("value not startswith 'x'", {}, False),
]

SKIFF_RULES = [
    # unknown (NULL) logic: only a final TRUE matches; NOT unknown stays unknown
    ("NOT (a > 5)", {}, False),
    ("NOT (a > 5)", {"a": "1"}, True),
    ("a > 5 OR b = 'x'", {"b": "x"}, True),
    ("a > 5 AND b = 'x'", {"b": "x"}, False),
    ("NOT (a > 5 AND b = 'x')", {"b": "y"}, True),  # FALSE dominates unknown
    ("NOT (a > 5 OR b = 'x')", {"b": "y"}, False),  # unknown OR FALSE is unknown
    # text that is not a number makes a numeric comparison unknown, NOT included
    ("a > 5", {"a": "abc"}, False),
    ("NOT (a > 5)", {"a": "abc"}, False),
    ("a <> 5", {"a": "abc"}, False),
    ("a = 5", {"a": "5.0"}, True),
    ("a = 5", {"a": "05"}, True),
    ("a > 5", {"a": "5.5"}, True),
    ("a > 5", {"a": " 6"}, False),
    ("a > -1e3", {"a": "-999"}, True),
    ("a < 9223372036854775807", {"a": "9223372036854775806"}, True),
    ("a > 1", {"a": "99999999999999999999999"}, True),
    # strings: = and <> compare text exactly
    ("a = 'EU'", {"a": "eu"}, False),
    ("a <> 'EU'", {"a": "eu"}, True),
    ("a != 'EU'", {"a": "eu"}, True),
    ("a = 'x'", {}, False),
    ("a <> 'x'", {}, False),
    ("'x' <> a", {}, False),
    ("a = b", {}, False),
    # booleans: Java's Boolean.valueOf on the property text
    ("flag = TRUE", {"flag": "True"}, True),
    ("flag = FALSE", {"flag": "yes"}, True),
    ("TRUE = flag", {"flag": "true"}, True),
    ("(a > 1) = TRUE", {"a": "2"}, True),
    ("(a > 1) = 1", {"a": "2"}, False),
    # a bare property is a condition that is never true; NOT of it is true when present
    ("flag", {"flag": "true"}, False),
    ("NOT flag", {"flag": "true"}, True),
    ("NOT flag", {}, False),
    # literals
    ("TRUE", {}, True),
    ("FALSE", {}, False),
    ("NULL", {}, False),
    ("NULL IS NULL", {}, True),
    ("1 < 2", {}, True),
    ("'5' = 5", {}, True),
    ("-a IS NULL", {"a": "5"}, True),
    ("a BETWEEN -5 AND -1", {"a": "-3"}, True),
    ("a NOT BETWEEN 10 AND 0", {"a": "5"}, True),
    ("TAGS IN ('a', 'b') AND x IS NOT NULL", {"TAGS": "b", "x": ""}, True),
    ("TAGS = 'a'", {"TAGS": "a || b"}, False),
    # SQL precedence for NOT (differs from RocketMQ, see docs/filter.md)
    ("NOT a = 'x'", {"a": "y"}, True),
    ("NOT a IS NULL", {"a": "y"}, True),
    ("NOT a > 5", {"a": "3"}, True),
    # keywords are case-insensitive, names are not
    ("A = '1' aNd b Is NoT nUlL", {"A": "1", "b": ""}, True),
    ("A = '1'", {"a": "1"}, False),
    # comments
    ("a = 1 -- trailing comment", {"a": "1"}, True),
    ("a /* inline */ = 1", {"a": "1"}, True),
    ("contains contains 'x'", {"contains": "xx"}, True),
    # docs/filter.md examples
    ("a > 5 AND region IN ('eu', 'us')", {"a": "7", "region": "eu"}, True),
    ("a > 5 AND region IN ('eu', 'us')", {"a": "x", "region": "eu"}, False),
    ("TAGS = 'TagA' AND price BETWEEN 10 AND 20.5", {"TAGS": "TagA", "price": "20.5"}, True),
    ("TAGS = 'TagA' AND price BETWEEN 10 AND 20.5", {"TAGS": "TagA", "price": "20.6"}, False),
    ("name STARTSWITH 'order-' AND NOT (status IN ('done', 'cancelled'))",
     {"name": "order-1", "status": "open"}, True),
    ("name STARTSWITH 'order-' AND NOT (status IN ('done', 'cancelled'))", {"name": "order-1"}, False),
]


@pytest.mark.parametrize(("expression", "props", "expected"), ROCKETMQ_CASES + SKIFF_RULES)
def test_evaluation(expression, props, expected):
    compiled = SqlFilter.compile(expression)
    assert compiled.matches(props) is expected
    assert compiled.matches_raw(encode_properties(props)) is expected
    assert compiled.matches_raw(memoryview(encode_properties(props))) is expected


def test_matches_raw_reads_only_what_it_needs_and_the_last_duplicate():
    compiled = SqlFilter.compile("region = 'eu' AND TAGS = 'A'")
    assert compiled.property_names == ("TAGS", "region")
    raw = b"region\x01us\x02TAGS\x01A\x02region\x01eu\x02"  # the last pair wins
    assert compiled.matches_raw(raw)
    assert not compiled.matches_raw(b"xregion\x01eu\x02TAGS\x01A\x02")  # name must be whole
    assert compiled.matches_raw(b"TAGS\x01A\x02region\x01eu")  # no trailing separator


def test_tag_codes_from_sql():
    from skiff.common.hashing import tag_hash

    def codes(expression):
        return SqlFilter.compile(expression).tag_codes

    assert codes("TAGS = 'a' AND x > 1") == {tag_hash("a")}
    assert codes("'a' = TAGS") == {tag_hash("a")}
    assert codes("TAGS IN ('a', 'b') OR TAGS = 'c'") == {tag_hash(t) for t in "abc"}
    assert codes("TAGS IN ('a', 'b') AND TAGS IN ('b', 'c')") == {tag_hash("b")}
    assert codes("TAGS = 'a' AND TAGS = 'b'") == frozenset()
    assert codes("TAGS = 'a' OR x > 1") is None
    assert codes("TAGS <> 'a'") is None
    assert codes("TAGS NOT IN ('a')") is None
    assert codes("NOT TAGS = 'a'") is None
    assert codes("x > 1") is None
