"""build_filter: types, caching, and errors a broker can put in a remark."""

import pickle
import traceback

import pytest

from skiff.filter import (
    ExpressionType,
    FilterError,
    FilterSyntaxError,
    MessageFilter,
    SqlFilter,
    TagFilter,
    build_filter,
)
from skiff.filter.factory import _build


@pytest.mark.parametrize("kind", [None, "", "TAG", "tag", ExpressionType.TAG])
def test_tag_types(kind):
    f = build_filter("A || B", kind)
    assert isinstance(f, TagFilter) and isinstance(f, MessageFilter)
    assert f.expression_type is ExpressionType.TAG
    assert f.tags == {"A", "B"}


@pytest.mark.parametrize("kind", ["SQL92", "sql92", ExpressionType.SQL92])
def test_sql_types(kind):
    f = build_filter("a > 1", kind)
    assert isinstance(f, SqlFilter) and isinstance(f, MessageFilter)
    assert f.expression_type is ExpressionType.SQL92
    assert f.needs_properties and f.tag_codes is None
    assert f.matches({"a": "2"}) and not f.matches({"a": "1"})


def test_default_type_is_tag_and_none_means_everything():
    assert build_filter(None).tags is None
    assert build_filter("*").matches({})


def test_compiled_filters_are_cached_by_type_and_expression():
    assert build_filter("a > 1", "SQL92") is build_filter("a > 1", ExpressionType.SQL92)
    assert build_filter("a", "TAG") is not build_filter("a", "SQL92")


def test_unknown_type_is_a_filter_error():
    with pytest.raises(FilterError, match="unsupported expression type 'CLASS'"):
        build_filter("x", "CLASS")


def test_empty_sql_is_a_syntax_error():
    for expression in (None, "", "   "):
        with pytest.raises(FilterSyntaxError, match="expected a value"):
            build_filter(expression, "SQL92")


def test_canonical_text():
    f = build_filter("(a>1)and(b in('x','y'))", "SQL92")
    assert f.canonical == "a > 1 AND b IN ('x', 'y')"


def test_failures_are_cached_and_raised_afresh():
    bad = "a > 1 AND " + " OR ".join(f"b = {i}" for i in range(200)) + " OR"
    depths = []
    for _ in range(3):
        hits = _build.cache_info().hits
        with pytest.raises(FilterSyntaxError, match="SQL92 syntax error at column") as info:
            build_filter(bad, "SQL92")
        depths.append(len(traceback.extract_tb(info.value.__traceback__)))
    assert _build.cache_info().hits == hits + 1  # the last two came from the cache
    assert depths[0] == depths[1] == depths[2]  # re-raising does not grow the traceback


def test_syntax_errors_survive_pickling():
    with pytest.raises(FilterSyntaxError) as info:
        build_filter("a >", "SQL92")
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.position, copy.expected) == (
        str(info.value),
        info.value.position,
        info.value.expected,
    )
