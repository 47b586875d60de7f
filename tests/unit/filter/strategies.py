"""Hypothesis strategies: valid SQL92 trees (as the parser would build them) and messages.

Trees obey the parser's canonical form (AND/OR flattened, no negated number
literals, no plus) and RocketMQ's parse-time checks, so every generated tree
must print to text that parses back to it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from skiff.filter.sql import ast as t

NAMES = ["a", "b", "A", "TAGS", "$x", "_y1", "contains"]
"""Few names, so generated messages and expressions often meet; 'contains' is a
property name that is also a (contextual) keyword."""

TEXTS = ["", "x", "1", "2.5", "-3", "true", "TRUE", "it's", "eu", "us", "é", "a''b"]
VALUES = TEXTS + ["10", "0", "1e3", "010", " 1", "+4", ".5", "5.", "NaN", "9223372036854775808"]

names = st.sampled_from(NAMES)
texts = st.sampled_from(TEXTS) | st.text(max_size=4)
numbers = (
    st.integers(-12, 12)
    | st.integers(-(2**63) + 1, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
)
prop = names.map(t.Property)
number = numbers.map(t.Number)
string = texts.map(t.String)
boolean = st.booleans().map(t.Bool)
eq_ops = st.sampled_from([t.CompareOp.EQ, t.CompareOp.NE])
order_ops = st.sampled_from(sorted(t.ORDER_OPS, key=lambda o: o.value))
match_ops = st.sampled_from(list(t.MatchOp))

# Composite strategies throughout: nested `recursive`/`one_of` strategies have
# reprs of megabytes, which Hypothesis builds (and warns about) when reporting.


@st.composite
def negation(draw: st.DrawFn) -> t.Expr:
    """``-x`` of a non-number (numbers fold into their literal), possibly repeated."""
    node = draw(prop | string | boolean | st.just(t.Null()))
    for _ in range(draw(st.integers(1, 3))):
        node = t.Negate(node)
    return node


orderable = prop | number | negation()
"""What > >= < <= and BETWEEN accept (RocketMQ's checkLessThanOperand)."""
value = prop | number | string | boolean | negation()


def flat(kind: type[t.And] | type[t.Or], items: list[t.Expr]) -> t.Expr:
    out: list[t.Expr] = []
    for item in items:
        out.extend(item.operands if isinstance(item, kind) else (item,))
    return kind(tuple(out))


def _valid_equality(left: t.Expr, right: t.Expr) -> bool:
    if isinstance(left, t.Null) or isinstance(right, t.Null):
        return False
    return not (isinstance(left, t.Bool) and isinstance(right, (t.Number, t.String)))


@st.composite
def equality(draw: st.DrawFn, operands: st.SearchStrategy[t.Expr]) -> t.Expr:
    left, right = draw(operands), draw(operands)
    if not _valid_equality(left, right):
        left, right = t.Property("a"), right if not isinstance(right, t.Null) else t.Bool(True)
    return t.Compare(draw(eq_ops), left, right)


@st.composite
def between(draw: st.DrawFn) -> t.Expr:
    x, low, high, negated = draw(orderable), draw(orderable), draw(orderable), draw(st.booleans())
    numbers_only = isinstance(low, t.Number) and isinstance(high, t.Number)
    if not negated and numbers_only and low.value > high.value:  # type: ignore[union-attr]
        low, high = high, low
    return t.Between(x, low, high, negated)


leaf_condition = st.one_of(
    boolean,
    st.just(t.Null()),
    prop,
    st.builds(t.Compare, order_ops, orderable, orderable),
    equality(value),
    between(),
    st.builds(t.In, prop, st.lists(texts, min_size=1, max_size=4).map(tuple), st.booleans()),
    st.builds(t.IsNull, value | st.just(t.Null()), st.booleans()),
    st.builds(t.Match, match_ops, value, texts, st.booleans()),
)


@st.composite
def _level(draw: st.DrawFn, inner: st.SearchStrategy[t.Expr]) -> t.Expr:
    """A leaf half the time, else a node over `inner` (a plain `|` would pick the
    nine leaf kinds nine times as often)."""
    kind = draw(st.sampled_from(["leaf", "not", "and", "or", "eq", "isnull", "match"]))
    if kind == "leaf":
        return draw(leaf_condition)
    if kind == "not":
        return t.Not(draw(inner))
    if kind in ("and", "or"):
        items = draw(st.lists(inner, min_size=2, max_size=3))
        return flat(t.And if kind == "and" else t.Or, items)
    if kind == "eq":
        return draw(equality(inner | value))
    if kind == "isnull":
        return t.IsNull(draw(inner), draw(st.booleans()))
    return t.Match(draw(match_ops), draw(inner), draw(texts), draw(st.booleans()))


def _conditions(depth: int) -> st.SearchStrategy[t.Expr]:
    strategy = leaf_condition
    for _ in range(depth):
        strategy = _level(strategy)
    return strategy


conditions = _conditions(3)
"""Whole expressions: anything RocketMQ accepts as a selector."""


property_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    max_size=5,
)
messages = st.dictionaries(names, st.sampled_from(VALUES) | property_text, max_size=6)
"""Property maps over the same few names, with values a message can carry (no 0x01, 0x02)."""

TOKENS = [
    "a", "b", "TAGS", "'x'", "'it''s'", "'", "1", "-", "+", "2.5", ".5", "1e3", "7L",
    "99999999999999999999", "1e999", "(", ")", ",", "=", "<>", "!=", ">", ">=", "<", "<=",
    "AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS",
    "STARTSWITH", "ENDSWITH", "--c\n", "/* c */", "/*", "!", "\n", "$", "0", "00",
]
token_soup = st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join)
"""Random sequences of real tokens: reach deep parser states that random text does not."""

_RAW_PIECES = [n.encode() for n in NAMES] + [
    b"ab", b"xa", b"\x01", b"\x02", b"x", b"1", b"-2.5", b"true", b"\xc3", b"\xa9", b"\xff", b" "
]
raw_properties = st.lists(st.sampled_from(_RAW_PIECES), max_size=24).map(b"".join)
"""Stored properties bytes as a careless writer might leave them: names, values,
separators and stray bytes in any order, so duplicates and malformed pairs occur."""
