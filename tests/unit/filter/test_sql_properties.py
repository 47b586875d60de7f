"""Property tests: print/parse round trip, compiled closures against the reference
evaluator, raw bytes against decoded properties, and no input raising anything
but FilterSyntaxError."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.common.hashing import tag_hash
from skiff.common.properties import decode_properties, encode_properties
from skiff.filter import FilterSyntaxError, SqlFilter, build_filter, parse_tags
from skiff.filter.sql.parser import parse_sql
from skiff.filter.sql.printer import to_sql
from tests.unit.filter.reference import ref_matches
from tests.unit.filter.strategies import conditions, messages, raw_properties, token_soup

SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(conditions)
def test_printed_tree_parses_back_to_itself(tree):
    text = to_sql(tree)
    parsed = parse_sql(text)
    assert parsed == tree, text
    assert repr(parsed) == repr(tree)  # also tells 5 from 5.0
    assert to_sql(parsed) == text


@SETTINGS
@given(conditions, st.lists(messages, min_size=1, max_size=8))
def test_compiled_filter_agrees_with_reference_evaluator(tree, batch):
    compiled = SqlFilter(to_sql(tree), tree)
    for props in batch:
        expected = ref_matches(tree, props)
        assert compiled.matches(props) is expected, (to_sql(tree), props)
        assert compiled.matches_raw(encode_properties(props)) is expected, (to_sql(tree), props)
        if expected and compiled.tag_codes is not None:
            # the pre-filter may let strangers through, never turn a match away
            assert tag_hash(props.get("TAGS")) in compiled.tag_codes


@settings(max_examples=200, deadline=None)
@given(conditions, st.lists(raw_properties, min_size=1, max_size=6))
def test_matches_raw_agrees_with_matches_on_decoded_bytes(tree, raws):
    """Malformed, duplicated and truncated pairs read the same both ways."""
    compiled = SqlFilter(to_sql(tree), tree)
    for raw in raws:
        assert compiled.matches_raw(raw) is compiled.matches(decode_properties(raw)), raw


def _only_syntax_errors(text: str) -> None:
    for kind in ("SQL92", "TAG"):
        try:
            build_filter(text, kind)
        except FilterSyntaxError as e:
            assert e.message.startswith("SQL92 syntax error at ") or kind == "TAG"
            assert 0 <= e.position.offset <= len(text)
            assert e.position.line >= 1 and e.position.column >= 1


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=40))
def test_random_text_raises_only_filter_syntax_error(text):
    _only_syntax_errors(text)


@settings(max_examples=400, deadline=None)
@given(token_soup)
def test_token_soup_raises_only_filter_syntax_error(text):
    _only_syntax_errors(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_random_tag_expressions_match_by_exact_tag(text):
    try:
        tags = parse_tags(text)
    except FilterSyntaxError:
        assert text.strip() and not text.replace("|", "").strip()
        return
    if tags.tags is not None:
        for tag in tags.tags:
            assert tags.matches({"TAGS": tag})
            if "\x01" not in tag and "\x02" not in tag:  # a stored TAGS value cannot hold these
                assert tags.matches_raw(encode_properties({"TAGS": tag, "k": "v"}))
        assert not tags.matches({})
