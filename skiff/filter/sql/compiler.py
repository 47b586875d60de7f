"""A checked SQL92 tree turned into nested Python closures, built once per subscription.

Each node becomes one function of the properties mapping; a message is then
judged by calling the root, with no tree walking and no dispatch on node
types. Conditions return True, False or None (unknown) and combine with
RocketMQ's three-valued AND/OR/NOT (`LogicExpression`, `UnaryExpression`);
only a final True matches. The commonest shapes — a property against a
literal, BETWEEN two numbers, IN — get closures that read the property
directly instead of calling a child closure for each side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    Negate,
    Not,
    Null,
    Number,
    Or,
    Property,
    String,
)
from skiff.filter.sql.values import (
    FLIPPED,
    ORDER,
    Value,
    as_condition,
    compare,
    negate_condition,
    negate_value,
    string_is_true,
    string_match,
    to_number,
)

Props = Mapping[str, str]
Fn = Callable[[Props], Any]


def compile_condition(node: Expr) -> Callable[[Props], bool | None]:
    """The closure for a whole expression: True, False or None (unknown) per message."""
    if isinstance(node, Property):
        name = node.name
        return lambda p: as_condition(p.get(name))
    return _compile(node)


def _compile(node: Expr) -> Fn:  # noqa: C901 - one branch per node type
    if isinstance(node, (Null, Bool, Number, String)):
        constant = None if isinstance(node, Null) else node.value
        return lambda p: constant
    if isinstance(node, Property):
        name = node.name
        return lambda p: p.get(name)
    if isinstance(node, Negate):
        operand = _compile(node.operand)
        return lambda p: negate_value(operand(p))
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, Between):
        return _between(node)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, IsNull):
        return _is_null(node)
    if isinstance(node, Match):
        kind, pattern, negated = node.op.value, node.pattern, node.negated
        operand = _compile(node.operand)
        return lambda p: string_match(kind, operand(p), pattern, negated)
    if isinstance(node, Not):
        inner = compile_condition(node.operand)
        return lambda p: negate_condition(inner(p))
    if isinstance(node, And):
        return _logic([compile_condition(o) for o in node.operands], decisive=False)
    if isinstance(node, Or):
        return _logic([compile_condition(o) for o in node.operands], decisive=True)
    raise TypeError(f"not a SQL92 node: {node!r}")


def _compare(node: Compare) -> Fn:
    if isinstance(node.left, Property) and isinstance(node.right, (Number, String, Bool)):
        return _property_vs_literal(node.op, node.left.name, node.right.value)
    if isinstance(node.right, Property) and isinstance(node.left, (Number, String, Bool)):
        return _property_vs_literal(FLIPPED[node.op], node.right.name, node.left.value)
    op, left, right = node.op, _compile(node.left), _compile(node.right)
    return lambda p: compare(op, left(p), right(p))


def _property_vs_literal(op: CompareOp, name: str, literal: Value) -> Fn:
    if op in ORDER_OPS:
        return _ordered_property(ORDER[op], name, literal)
    unequal = op is CompareOp.NE
    if type(literal) is str:
        return lambda p: None if (v := p.get(name)) is None else (v == literal) is not unequal
    if type(literal) is bool:
        return lambda p: (
            None if (v := p.get(name)) is None else (string_is_true(v) is literal) is not unequal
        )
    return _numeric_property(name, lambda n: (n == literal) is not unequal)


def _ordered_property(test: Callable[[object, object], bool], name: str, literal: Value) -> Fn:
    return _numeric_property(name, lambda n: test(n, literal))


def _numeric_property(name: str, test: Callable[[int | float], bool]) -> Fn:
    def numeric(p: Props) -> bool | None:
        text = p.get(name)
        if text is None:
            return None
        number = to_number(text)
        return None if number is None else test(number)

    return numeric


def _between(node: Between) -> Fn:
    if isinstance(node.operand, Property) and isinstance(node.low, Number) and isinstance(node.high, Number):
        low, high = node.low.value, node.high.value
        if node.negated:
            return _numeric_property(node.operand.name, lambda n: not low <= n <= high)
        return _numeric_property(node.operand.name, lambda n: low <= n <= high)
    return _compile(_as_comparisons(node))


def _as_comparisons(node: Between) -> Expr:
    """RocketMQ's own definition: x >= low AND x <= high; NOT: x < low OR x > high."""
    x, low, high = node.operand, node.low, node.high
    if node.negated:
        return Or((Compare(CompareOp.LT, x, low), Compare(CompareOp.GT, x, high)))
    return And((Compare(CompareOp.GE, x, low), Compare(CompareOp.LE, x, high)))


def _in(node: In) -> Fn:
    name, values, negated = node.operand.name, frozenset(node.values), node.negated
    return lambda p: None if (v := p.get(name)) is None else (v in values) is not negated


def _is_null(node: IsNull) -> Fn:
    negated = node.negated
    if isinstance(node.operand, Property):
        name = node.operand.name
        return (lambda p: name in p) if negated else (lambda p: name not in p)
    operand = _compile(node.operand)
    return lambda p: (operand(p) is None) is not negated


def _logic(parts: list[Fn], decisive: bool) -> Fn:
    """AND when `decisive` is False, OR when it is True (RocketMQ's LogicExpression):
    the decisive value wins outright, else unknown if any part is unknown."""
    if len(parts) == 2:
        first, second = parts

        def both(p: Props) -> bool | None:
            a = first(p)
            if a is decisive:
                return decisive
            b = second(p)
            if b is decisive:
                return decisive
            return None if a is None or b is None else not decisive

        return both

    def every(p: Props) -> bool | None:
        unknown = False
        for part in parts:
            r = part(p)
            if r is decisive:
                return decisive
            unknown = unknown or r is None
        return None if unknown else not decisive

    return every
