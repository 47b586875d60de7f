"""A plain tree-walking evaluator of SQL92 trees, written from docs/filter.md's rules.

It shares no code with `skiff.filter.sql.values` or the compiler: it walks the
tree for every message, evaluates every operand (no short cuts), and reads
numbers by its own rules, so agreement with the compiled closures is evidence
rather than the same code run twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from skiff.filter.sql import ast as t

LONG_MAX = 2**63 - 1


def ref_number(text: str) -> int | float | None:
    """Decimal's grammar restricted to ASCII digits, signs, point and exponent."""
    if not text or any(c not in "0123456789+-.eE" for c in text):
        return None
    try:
        Decimal(text)
    except InvalidOperation:
        return None
    if "." in text or "e" in text.lower():
        return float(text)
    value = int(text)
    return value if abs(value) <= LONG_MAX else float(text)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _eq(left: object, right: object) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) and isinstance(right, bool):
        return left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    if _is_num(left) and _is_num(right):
        return left == right
    if isinstance(right, str):
        left, right = right, left
    if isinstance(left, str) and isinstance(right, bool):
        return (left.lower() == "true") == right
    if isinstance(left, str) and _is_num(right):
        n = ref_number(left)
        return None if n is None else n == right
    return False  # a boolean against a number


def _num(v: object) -> int | float | None:
    if isinstance(v, str):
        return ref_number(v)
    return v if _is_num(v) else None  # type: ignore[return-value]


def _order(op: t.CompareOp, left: object, right: object) -> bool | None:
    a, b = _num(left), _num(right)
    if a is None or b is None:
        return None
    return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[op.value]


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _all(values: list[bool | None]) -> bool | None:
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _any(values: list[bool | None]) -> bool | None:
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def cond(node: t.Expr, props: Mapping[str, str]) -> bool | None:
    """A node in a boolean position (RocketMQ's asBooleanExpression)."""
    v = value(node, props)
    if v is None or isinstance(v, bool):
        return v
    return False


def value(node: t.Expr, props: Mapping[str, str]) -> object:  # noqa: C901
    if isinstance(node, t.Null):
        return None
    if isinstance(node, (t.Bool, t.Number, t.String)):
        return node.value
    if isinstance(node, t.Property):
        return props.get(node.name)
    if isinstance(node, t.Negate):
        v = value(node.operand, props)
        return -v if _is_num(v) else None  # type: ignore[operator]
    if isinstance(node, t.Compare):
        left, right = value(node.left, props), value(node.right, props)
        if node.op is t.CompareOp.EQ:
            return _eq(left, right)
        if node.op is t.CompareOp.NE:
            return _not(_eq(left, right))
        return _order(node.op, left, right)
    if isinstance(node, t.Between):
        x, lo, hi = (value(n, props) for n in (node.operand, node.low, node.high))
        if node.negated:
            return _any([_order(t.CompareOp.LT, x, lo), _order(t.CompareOp.GT, x, hi)])
        return _all([_order(t.CompareOp.GE, x, lo), _order(t.CompareOp.LE, x, hi)])
    if isinstance(node, t.In):
        v = props.get(node.operand.name)
        return None if v is None else (v in node.values) != node.negated
    if isinstance(node, t.IsNull):
        return (value(node.operand, props) is None) != node.negated
    if isinstance(node, t.Match):
        v = value(node.operand, props)
        if not isinstance(v, str) or not node.pattern:
            return False
        hit = {
            "CONTAINS": node.pattern in v,
            "STARTSWITH": v.startswith(node.pattern),
            "ENDSWITH": v.endswith(node.pattern),
        }[node.op.value]
        return hit != node.negated
    if isinstance(node, t.Not):
        return _not(cond(node.operand, props))
    if isinstance(node, t.And):
        return _all([cond(o, props) for o in node.operands])
    if isinstance(node, t.Or):
        return _any([cond(o, props) for o in node.operands])
    raise TypeError(node)


def ref_matches(node: t.Expr, props: Mapping[str, str]) -> bool:
    return cond(node, props) is True
