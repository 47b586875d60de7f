"""SQL92 text from a syntax tree, with only the parentheses the grammar needs.

`to_sql(parse_sql(text))` is the canonical form of `text`, and
`parse_sql(to_sql(tree)) == tree` for every tree the parser can build (a
property test checks it). The broker logs and reports filters in this form.
"""

from __future__ import annotations

from skiff.filter.sql.ast import (
    ORDER_OPS,
    And,
    Between,
    Bool,
    Compare,
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

# Binding strength, loosest first, as the grammar's rules nest.
_OR, _AND, _NOT, _EQUALITY, _COMPARISON, _UNARY, _ATOM = range(1, 8)


def quote(text: str) -> str:
    """A string literal: single quotes, a quote inside doubled."""
    return "'" + text.replace("'", "''") + "'"


def to_sql(node: Expr) -> str:
    return _show(node, _OR)


def _level(node: Expr) -> int:
    if isinstance(node, Or):
        return _OR
    if isinstance(node, And):
        return _AND
    if isinstance(node, Not):
        return _NOT
    if isinstance(node, IsNull) or (isinstance(node, Compare) and node.op not in ORDER_OPS):
        return _EQUALITY
    if isinstance(node, (Compare, Between, In, Match)):
        return _COMPARISON
    if isinstance(node, Negate) or (isinstance(node, Number) and _is_negative(node.value)):
        return _UNARY
    return _ATOM


def _is_negative(value: int | float) -> bool:
    return value < 0 or str(value).startswith("-")


def _show(node: Expr, min_level: int) -> str:
    text = _text(node)
    return text if _level(node) >= min_level else f"({text})"


def _text(node: Expr) -> str:  # noqa: C901 - one branch per node type
    if isinstance(node, Or):
        return " OR ".join(_show(o, _AND) for o in node.operands)
    if isinstance(node, And):
        return " AND ".join(_show(o, _NOT) for o in node.operands)
    if isinstance(node, Not):
        return "NOT " + _show(node.operand, _NOT)
    if isinstance(node, Compare):
        right_level = _UNARY if node.op in ORDER_OPS else _COMPARISON
        left = _show(node.left, _level(node))
        return f"{left} {node.op.value} {_show(node.right, right_level)}"
    if isinstance(node, IsNull):
        return f"{_show(node.operand, _EQUALITY)} IS {_not(node.negated)}NULL"
    if isinstance(node, Between):
        low, high = _show(node.low, _UNARY), _show(node.high, _UNARY)
        return f"{_show(node.operand, _COMPARISON)} {_not(node.negated)}BETWEEN {low} AND {high}"
    if isinstance(node, In):
        values = ", ".join(quote(v) for v in node.values)
        return f"{node.operand.name} {_not(node.negated)}IN ({values})"
    if isinstance(node, Match):
        operand = _show(node.operand, _COMPARISON)
        return f"{operand} {_not(node.negated)}{node.op.value} {quote(node.pattern)}"
    if isinstance(node, Negate):
        operand = _show(node.operand, _UNARY)
        return "-" + (f"({operand})" if operand.startswith("-") else operand)
    return _atom(node)


def _atom(node: Expr) -> str:
    if isinstance(node, Property):
        return node.name
    if isinstance(node, String):
        return quote(node.value)
    if isinstance(node, Number):
        return repr(node.value)
    if isinstance(node, Bool):
        return "TRUE" if node.value else "FALSE"
    if isinstance(node, Null):
        return "NULL"
    raise TypeError(f"not a SQL92 node: {node!r}")


def _not(negated: bool) -> str:
    return "NOT " if negated else ""
