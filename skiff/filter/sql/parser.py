"""SQL92 text to a checked syntax tree, or a `FilterSyntaxError` that says where and why.

The lark LALR parser calls `_Builder` at each reduction, so the tree is built
bottom-up without recursion and without an intermediate parse tree. The
builder also makes RocketMQ's parse-time checks (`ComparisonExpression`,
`SelectorParser.asBooleanExpression`), so an expression RocketMQ refuses is
refused here too, with the position of the operator at fault:

- AND, OR, NOT and the whole expression need conditions (a bare property is
  allowed: it is a condition that is never true, as in RocketMQ);
- ``> >= < <=`` and BETWEEN take numbers, properties or negations only;
- ``=`` and ``<>`` refuse NULL, and TRUE/FALSE on the left of another literal;
- IN needs a property on its left; BETWEEN of two numbers needs low <= high;
- integer literals fit in a signed 64-bit long, floats are finite.
"""

from __future__ import annotations

import functools
from typing import cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from skiff.common.limits import FILTER_EXPRESSION_MAX_CHARS, FILTER_NESTING_MAX_DEPTH
from skiff.filter.api import FilterSyntaxError, Position
from skiff.filter.sql.ast import (
    ORDER_OPS,
    And,
    Between,
    Bool,
    Compare,
    CompareOp,
    Expr,
    In,
    IsNull,
    Match,
    MatchOp,
    Negate,
    Not,
    Null,
    Number,
    Or,
    Property,
    String,
    depth,
    is_condition,
)
from skiff.filter.sql.grammar import (
    GRAMMAR,
    OPERATOR_TERMINALS,
    RESERVED_WORDS,
    TERMINAL_WORDS,
    VALUE_TERMINALS,
)
from skiff.filter.sql.printer import to_sql

LONG_MAX = 2**63 - 1
_OPS = {
    "EQ": CompareOp.EQ,
    "NE": CompareOp.NE,
    "GT": CompareOp.GT,
    "GE": CompareOp.GE,
    "LT": CompareOp.LT,
    "LE": CompareOp.LE,
}
_SHOWN_CHARS = 40


class _Rejected(Exception):
    """A check failed at `token`; `parse_sql` turns it into a FilterSyntaxError."""

    def __init__(self, message: str, token: Token | None) -> None:
        super().__init__(message)
        self.message = message
        self.token = token


def parse_sql(text: str) -> Expr:
    """Parse and check one SQL92 selector; raises FilterSyntaxError for any bad input."""
    if len(text) > FILTER_EXPRESSION_MAX_CHARS:
        raise _error(
            text,
            FILTER_EXPRESSION_MAX_CHARS,
            f"the expression is {len(text)} characters long; "
            f"the limit is {FILTER_EXPRESSION_MAX_CHARS}",
        )
    try:
        # The builder is the parser's transformer: the parse answers what it built.
        tree = cast(Expr, _parser().parse(text))
        _condition(tree, None, "the whole expression")
    except _Rejected as e:
        at = e.token.start_pos if e.token else None
        raise _error(text, at or 0, e.message) from None
    except UnexpectedInput as e:
        raise _unexpected(text, e) from None
    levels = depth(tree)
    if levels > FILTER_NESTING_MAX_DEPTH:
        raise _error(
            text,
            0,
            f"the expression nests {levels} levels deep; the limit is {FILTER_NESTING_MAX_DEPTH}",
        )
    return tree


@functools.cache
def _parser() -> Lark:
    return Lark(
        GRAMMAR,
        parser="lalr",
        lexer="contextual",
        transformer=_Builder(),
        lexer_callbacks={"ID": _not_reserved},
    )


def _not_reserved(token: Token) -> Token:
    if token.value.upper() in RESERVED_WORDS:
        raise _Rejected(
            f"found the keyword {token.value.upper()} where a value belongs "
            "(keywords cannot name properties)",
            token,
        )
    return token


def describe(node: Expr) -> str:
    """A node as an error message names it (checks run before the depth limit,
    so a node may be too deep to print)."""
    too_deep = depth(node) > FILTER_NESTING_MAX_DEPTH
    shown = f"({type(node).__name__.upper()} ...)" if too_deep else to_sql(node)
    if len(shown) > _SHOWN_CHARS:
        shown = shown[: _SHOWN_CHARS - 3] + "..."
    if isinstance(node, String):
        return f"the string {shown}"
    if isinstance(node, Number):
        return f"the number {shown}"
    if isinstance(node, (Bool, Null)):
        return shown
    if isinstance(node, Property):
        return f"the property {shown}"
    if isinstance(node, Negate):
        return f"the value {shown}"
    return f"the condition {shown}"


def _condition(node: Expr, token: Token | None, where: str) -> Expr:
    """RocketMQ's `asBooleanExpression`: conditions and bare properties only."""
    if is_condition(node) or isinstance(node, Property):
        return node
    raise _Rejected(f"{where} must be a condition, not {describe(node)}", token)


def _orderable(node: Expr, token: Token) -> Expr:
    """RocketMQ's `checkLessThanOperand`: numbers, properties and negations only."""
    if isinstance(node, String) or is_condition(node):
        raise _Rejected(f"{token.value.upper()} compares numbers, not {describe(node)}", token)
    return node


def _flat(kind: type[And] | type[Or], node: Expr) -> tuple[Expr, ...]:
    return node.operands if isinstance(node, kind) else (node,)


@v_args(inline=True)
class _Builder(Transformer):
    """One method per grammar alias; each returns a node or raises _Rejected."""

    def or_(self, left: Expr, op: Token, right: Expr) -> Expr:
        return Or(_flat(Or, _condition(left, op, "OR")) + _flat(Or, _condition(right, op, "OR")))

    def and_(self, left: Expr, op: Token, right: Expr) -> Expr:
        return And(
            _flat(And, _condition(left, op, "AND")) + _flat(And, _condition(right, op, "AND"))
        )

    def not_(self, op: Token, operand: Expr) -> Expr:
        return Not(_condition(operand, op, "NOT"))

    def compare(self, left: Expr, op: Token, right: Expr) -> Expr:
        kind = _OPS[op.type]
        if kind in ORDER_OPS:
            return Compare(kind, _orderable(left, op), _orderable(right, op))
        for side in (left, right):
            if isinstance(side, Null):
                raise _Rejected(
                    f"{op.value} cannot compare with NULL; use IS NULL or IS NOT NULL", op
                )
        if isinstance(left, Bool) and isinstance(right, (Number, String)):
            raise _Rejected(f"{describe(left)} cannot be compared with {describe(right)}", op)
        return Compare(kind, left, right)

    def between(self, operand: Expr, op: Token, low: Expr, _and: Token, high: Expr) -> Expr:
        node = self._between(operand, op, low, high, negated=False)
        if isinstance(low, Number) and isinstance(high, Number) and low.value > high.value:
            raise _Rejected(
                f"BETWEEN {to_sql(low)} AND {to_sql(high)}: the low bound is above the high bound",
                op,
            )
        return node

    def not_between(
        self, operand: Expr, _not: Token, op: Token, low: Expr, _and: Token, high: Expr
    ) -> Expr:
        return self._between(operand, op, low, high, negated=True)

    @staticmethod
    def _between(operand: Expr, op: Token, low: Expr, high: Expr, negated: bool) -> Between:
        return Between(_orderable(operand, op), _orderable(low, op), _orderable(high, op), negated)

    def in_(self, operand: Expr, op: Token, _l: Token, values: tuple[str, ...], _r: Token) -> Expr:
        return In(self._in_operand(operand, op), values)

    def not_in(
        self, operand: Expr, _not: Token, op: Token, _l: Token, values: tuple[str, ...], _r: Token
    ) -> Expr:
        return In(self._in_operand(operand, op), values, negated=True)

    @staticmethod
    def _in_operand(operand: Expr, op: Token) -> Property:
        if not isinstance(operand, Property):
            raise _Rejected(f"IN needs a property name on its left, not {describe(operand)}", op)
        return operand

    def match(self, operand: Expr, op: Token, pattern: Token) -> Expr:
        return Match(MatchOp(op.value.upper()), operand, _unquote(pattern))

    def not_match(self, operand: Expr, _not: Token, op: Token, pattern: Token) -> Expr:
        return Match(MatchOp(op.value.upper()), operand, _unquote(pattern), negated=True)

    def is_null(self, operand: Expr, _is: Token, _null: Token) -> Expr:
        return IsNull(operand)

    def is_not_null(self, operand: Expr, _is: Token, _not: Token, _null: Token) -> Expr:
        return IsNull(operand, negated=True)

    def string_list(self, *items: Token) -> tuple[str, ...]:
        return tuple(_unquote(t) for t in items if t.type == "STRING")

    def negate(self, _minus: Token, operand: Expr) -> Expr:
        if isinstance(operand, Number):
            return Number(-operand.value)
        return Negate(operand)

    def plus(self, _plus: Token, operand: Expr) -> Expr:
        return operand

    def parens(self, _l: Token, inner: Expr, _r: Token) -> Expr:
        return inner

    def string(self, token: Token) -> Expr:
        return String(_unquote(token))

    def decimal(self, token: Token) -> Expr:
        value = int(token.value.rstrip("lL"))
        if value > LONG_MAX:
            raise _Rejected(f"the number {token.value} does not fit in a 64-bit long", token)
        return Number(value)

    def float(self, token: Token) -> Expr:
        value = float(token.value)
        if value == float("inf"):
            raise _Rejected(f"the number {token.value} is too large for a double", token)
        return Number(value)

    def true(self, _token: Token) -> Expr:
        return Bool(True)

    def false(self, _token: Token) -> Expr:
        return Bool(False)

    def null(self, _token: Token) -> Expr:
        return Null()

    def property(self, token: Token) -> Expr:
        return Property(token.value)


def _unquote(token: Token) -> str:
    return token.value[1:-1].replace("''", "'")


def position_at(text: str, offset: int) -> Position:
    line_start = text.rfind("\n", 0, offset) + 1
    return Position(text.count("\n", 0, offset) + 1, offset - line_start + 1, offset)


def _error(
    text: str, offset: int, detail: str, expected: tuple[str, ...] = ()
) -> FilterSyntaxError:
    pos = position_at(text, offset)
    where = f"column {pos.column}" if pos.line == 1 else f"line {pos.line}, column {pos.column}"
    return FilterSyntaxError(f"SQL92 syntax error at {where}: {detail}", pos, expected)


def _unexpected(text: str, exc: UnexpectedInput) -> FilterSyntaxError:
    offset: int
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        at_end = token.type == "$END"
        offset = len(text) if at_end or token.start_pos is None else token.start_pos
        found = "the end of the expression" if at_end else repr(token.value)
        allowed = exc.expected
    else:
        assert isinstance(exc, UnexpectedCharacters)
        offset = exc.pos_in_stream  # type: ignore[assignment]  # the lexer's position: lark types it as its base's None
        if text.startswith("'", offset):
            return _error(text, offset, "this string is never closed with a quote")
        if text.startswith("/*", offset):
            return _error(text, offset, "this comment is never closed with */")
        found = f"the character {text[offset]!r}"
        allowed = exc.allowed
    before = _tokens_before(text, offset)
    expected = _expected_words(allowed, open_parens=_open_parens(before))
    context = f" after {before[-1].value!r}" if before else ""
    return _error(text, offset, f"expected {_join(expected)}{context}, found {found}", expected)


def _expected_words(names: set[str], open_parens: int) -> tuple[str, ...]:
    """What the parser would take, in words. LALR merges states, so the raw set may
    offer ')' with no '(' open, or omit the end; the count of open parentheses fixes that."""
    left = set(names)
    words: list[str] = []
    if "ID" in left:
        words.append("a value")
        left -= VALUE_TERMINALS
    if "EQ" in left:
        words.append("an operator")
        left -= OPERATOR_TERMINALS
        left.add("RPAR" if open_parens > 0 else "$END")
    left.discard("$END" if open_parens > 0 else "RPAR")
    end = "$END" in left
    left.discard("$END")
    words.extend(sorted({TERMINAL_WORDS.get(n, n) for n in left}))
    if end:
        words.append(TERMINAL_WORDS["$END"])
    return tuple(words)


def _join(words: tuple[str, ...]) -> str:
    if len(words) <= 1:
        return "".join(words) or "nothing more"
    return ", ".join(words[:-1]) + " or " + words[-1]


def _tokens_before(text: str, offset: int) -> list[Token]:
    """The tokens before `offset`, to say what an error comes after."""
    try:
        return list(_parser().lex(text[:offset]))
    except (UnexpectedInput, _Rejected):
        return []


def _open_parens(tokens: list[Token]) -> int:
    return sum(1 if t.type == "LPAR" else -1 if t.type == "RPAR" else 0 for t in tokens)
