"""Tag expressions, read as RocketMQ's FilterAPI.buildSubscriptionData reads them."""

import pytest

from skiff.common.hashing import tag_hash
from skiff.common.properties import encode_properties
from skiff.filter import FilterSyntaxError, parse_tags


@pytest.mark.parametrize("expression", [None, "", "*", "  ", " * "])
def test_everything(expression):
    tags = parse_tags(expression)
    assert tags.tags is None and tags.tag_codes is None
    assert tags.expression == "*"
    assert tags.matches({}) and tags.matches({"TAGS": "x"})
    assert tags.matches_raw(b"") and tags.matches_tag(None)
    assert tags.needs_properties is False


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("TagA", {"TagA"}),
        ("TagA || TagB", {"TagA", "TagB"}),
        ("TagA||TagB", {"TagA", "TagB"}),
        ("  TagA ||  || TagB  ||", {"TagA", "TagB"}),
        ("Tag A || B", {"Tag A", "B"}),
        ("A || *", {"A", "*"}),  # '*' among tags is a tag, as in RocketMQ
        ("a|b", {"a|b"}),
    ],
)
def test_tag_sets_and_codes(expression, expected):
    tags = parse_tags(expression)
    assert tags.tags == expected
    assert tags.tag_codes == {tag_hash(t) for t in expected}
    assert tags.expression == expression


def test_exact_match_on_tags_property():
    tags = parse_tags("TagA || TagB")
    assert tags.matches({"TAGS": "TagA", "k": "v"})
    assert not tags.matches({"TAGS": "taga"})
    assert not tags.matches({"TAGS": "TagA || TagB"})
    assert not tags.matches({})
    assert tags.matches_raw(encode_properties({"KEYS": "k1", "TAGS": "TagB"}))
    assert not tags.matches_raw(encode_properties({"XTAGS": "TagB"}))
    assert not tags.matches_raw(b"")
    assert tags.matches_tag("TagB") and not tags.matches_tag(None)


@pytest.mark.parametrize("expression", ["||", " || ", "|| ||"])
def test_expression_without_a_tag_is_an_error(expression):
    with pytest.raises(FilterSyntaxError, match="names no tag"):
        parse_tags(expression)
