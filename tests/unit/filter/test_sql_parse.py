"""SQL92 parsing: the trees built, RocketMQ's parse-time checks, and error positions."""

import pytest

from skiff.common.limits import FILTER_EXPRESSION_MAX_CHARS, FILTER_NESTING_MAX_DEPTH
from skiff.filter import FilterSyntaxError, Position
from skiff.filter.sql.ast import (
    And,
    Between,
    Bool,
    Compare,
    CompareOp,
    In,
    IsNull,
    Match,
    MatchOp,
    Negate,
    Not,
    Number,
    Or,
    Property,
    String,
)
from skiff.filter.sql.parser import parse_sql
from skiff.filter.sql.printer import to_sql

a, b, c = Property("a"), Property("b"), Property("c")


def gt(left, right):
    return Compare(CompareOp.GT, left, right)


def eq(left, right):
    return Compare(CompareOp.EQ, left, right)


TREES = [
    ("a > 5", gt(a, Number(5))),
    ("a > 5 AND b > 6 AND c > 7", And((gt(a, Number(5)), gt(b, Number(6)), gt(c, Number(7))))),
    ("a OR b AND c", Or((a, And((b, c))))),
    ("(a OR b) AND c", And((Or((a, b)), c))),
    ("a OR (b OR c)", Or((a, b, c))),
    ("NOT a > 5 AND b", And((Not(gt(a, Number(5))), b))),
    ("NOT NOT a", Not(Not(a))),
    ("a = b = TRUE", eq(eq(a, b), Bool(True))),
    ("a > 1 = TRUE", eq(gt(a, Number(1)), Bool(True))),
    ("a IS NULL IS NOT NULL", IsNull(IsNull(a), negated=True)),
    ("a <> 'it''s'", Compare(CompareOp.NE, a, String("it's"))),
    ("a != 'x'", Compare(CompareOp.NE, a, String("x"))),
    ("a > -5", gt(a, Number(-5))),
    ("a > - -5", gt(a, Number(5))),
    ("a > +5", gt(a, Number(5))),
    ("a > -b", gt(a, Negate(b))),
    ("a > 5L", gt(a, Number(5))),
    ("a > 5.", gt(a, Number(5.0))),
    ("a > .5E1", gt(a, Number(5.0))),
    ("a > 0.0", gt(a, Number(0.0))),
    ("a > -9223372036854775807", gt(a, Number(-(2**63) + 1))),
    ("a BETWEEN 1 AND 2 AND b", And((Between(a, Number(1), Number(2)), b))),
    ("a NOT BETWEEN 2 AND 1", Between(a, Number(2), Number(1), negated=True)),
    ("a IN ('x')", In(a, ("x",))),
    ("a NOT IN ('x', 'y')", In(a, ("x", "y"), negated=True)),
    ("a CONTAINS 'x'", Match(MatchOp.CONTAINS, a, "x")),
    ("a not StartsWith 'x'", Match(MatchOp.STARTSWITH, a, "x", negated=True)),
    ("in_1 = 1 AND $ab = 2", And((eq(Property("in_1"), Number(1)), eq(Property("$ab"), Number(2))))),
    ("((((a))))", a),
    ("a\n=\r\n1\t--x\n/* y\n*/", eq(a, Number(1))),
]


@pytest.mark.parametrize(("text", "tree"), TREES)
def test_trees(text, tree):
    assert parse_sql(text) == tree
    assert parse_sql(to_sql(tree)) == tree


def test_whitespace_and_case_do_not_change_the_tree():
    # RocketMQ ParserTest.testEquals
    assert parse_sql("a=3 and b<>4 And c>5 AND d<=4") == parse_sql("a=3  and    b<>4 And c>5 AND d<=4")
    assert parse_sql("a=3 and b<>4") != parse_sql("a=3 or b<>4")


ROCKETMQ_VALID = [
    "a=3 and b<>4 And c>5 AND d<=4",
    "a=3 or b<>4 Or c>5 OR d<=4",
    "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",
]


@pytest.mark.parametrize("text", ROCKETMQ_VALID)
def test_rocketmq_valid_expressions(text):
    assert parse_sql(to_sql(parse_sql(text))) == parse_sql(text)


# (text, column, words the message must contain)
ERRORS = [
    ("price >", 8, "expected a value after '>', found the end of the expression"),
    ("a > )", 5, "expected a value after '>', found ')'"),
    ("a and between 2 and 10", 7, "found the keyword BETWEEN where a value belongs"),
    ("a = not b", 5, "found the keyword NOT"),
    ("a between 10 and 0", 3, "the low bound is above the high bound"),
    ("a > 100000000000000000000000", 5, "does not fit in a 64-bit long"),
    ("a > 1e999", 5, "too large for a double"),
    ("a > 'x'", 3, "> compares numbers, not the string 'x'"),
    ("a >= TRUE", 3, ">= compares numbers, not TRUE"),
    ("a BETWEEN 'x' AND 2", 3, "BETWEEN compares numbers"),
    ("a > 1 > 2", 7, "compares numbers, not the condition a > 1"),
    ("a = NULL", 3, "use IS NULL"),
    ("NULL <> a", 6, "use IS NULL"),
    ("TRUE = 'x'", 6, "TRUE cannot be compared with the string 'x'"),
    ("5 IN ('a')", 3, "IN needs a property name"),
    ("a IN (1)", 7, "expected a string in single quotes after '('"),
    ("a CONTAINS b", 12, "expected a string in single quotes after 'CONTAINS'"),
    ("5", 1, "the whole expression must be a condition, not the number 5"),
    ("'x'", 1, "must be a condition, not the string 'x'"),
    ("a AND 5", 3, "AND must be a condition, not the number 5"),
    ("NOT -a", 1, "NOT must be a condition, not the value -a"),
    ("", 1, "expected a value, found the end of the expression"),
    ("a = 'abc", 5, "this string is never closed"),
    ("a /* x", 3, "this comment is never closed"),
    ("a ! b", 3, "expected an operator or the end of the expression after 'a', found the character '!'"),
    ("(a = 1 b", 8, "expected an operator or ')' after '1', found 'b'"),
    ("a IS 5", 6, "expected NOT or NULL after 'IS'"),
    ("a IN ('x' 'y')", 11, "expected ')' or ','"),
    ("a = 007", 6, "found '0'"),
    ("a = 0L", 6, "found 'L'"),
]


@pytest.mark.parametrize(("text", "column", "words"), ERRORS)
def test_errors_say_where_and_what(text, column, words):
    with pytest.raises(FilterSyntaxError) as info:
        parse_sql(text)
    error = info.value
    assert error.position.column == column, str(error)
    assert error.position == Position(1, column, column - 1)
    assert str(error).startswith(f"SQL92 syntax error at column {column}: ")
    assert words in str(error), str(error)


def test_error_on_a_later_line_gives_line_and_column():
    with pytest.raises(FilterSyntaxError) as info:
        parse_sql("a = 1 AND\n  b >\n  )")
    assert info.value.position == Position(3, 3, 18)
    assert str(info.value).startswith("SQL92 syntax error at line 3, column 3: ")
    assert info.value.expected == ("a value",)


def test_overlong_expression_is_refused_before_parsing():
    text = "a = '" + "x" * FILTER_EXPRESSION_MAX_CHARS + "'"
    with pytest.raises(FilterSyntaxError, match="characters long; the limit is"):
        parse_sql(text)


def test_deep_nesting_is_refused_cleanly():
    deep = "NOT " * (FILTER_NESTING_MAX_DEPTH + 5) + "a"
    with pytest.raises(FilterSyntaxError, match="levels deep; the limit is"):
        parse_sql(deep)
    ok = "NOT " * (FILTER_NESTING_MAX_DEPTH - 1) + "a"
    assert parse_sql(ok) is not None


WRAPPERS = [("(NOT ", ")"), ("NOT ", ""), ("(- ", ")"), ("- ", ""), ("(", ")"), ("(a = ", ")")]
TAILS = ["", " > 1", " = 'x'", " IN ('a')", " BETWEEN 1 AND 2", " AND 5", " IS NULL", " CONTAINS 'x'"]


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize(("opener", "closer"), WRAPPERS)
def test_deep_input_gives_a_syntax_error_or_a_tree_never_a_crash(opener, closer, tail):
    text = opener * 700 + "a" + closer * 700 + tail  # deeper than Python's recursion limit
    try:
        tree = parse_sql(text)
    except FilterSyntaxError as e:
        assert 0 <= e.position.offset <= len(text)
    else:
        assert opener == "(" and to_sql(tree).startswith("a")


def test_a_too_deep_operand_in_an_error_message_is_not_printed():
    with pytest.raises(FilterSyntaxError, match=r"compares numbers, not the condition \(NOT \.\.\.\)"):
        parse_sql("(" + "NOT " * 3000 + "a) > 1")


def test_parentheses_alone_do_not_nest():
    assert parse_sql("(" * 5000 + "a" + ")" * 5000) == a


def test_long_flat_lists_are_fine():
    text = " OR ".join(f"a = {i}" for i in range(1000))
    tree = parse_sql(text)
    assert isinstance(tree, Or) and len(tree.operands) == 1000
