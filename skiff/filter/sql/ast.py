"""The SQL92 selector's syntax tree: what the parser builds and the compiler reads.

Nodes are immutable and compare by value, so a parse can be checked against an
expected tree and a printed tree re-parses to an equal one. Parentheses and
unary ``+`` leave no node; ``-`` in front of a number literal is folded into
the literal; chains of AND (or of OR) are flattened into one node, which is
what keeps long ``a = 1 OR a = 2 OR ...`` lists shallow.

RocketMQ sorts expressions into "boolean" ones (comparisons, logic, TRUE,
FALSE, NULL) and values; `is_condition` is that test, used by the parser for
the same parse-time checks RocketMQ makes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Union


class CompareOp(str, Enum):
    EQ = "="
    NE = "<>"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


class MatchOp(str, Enum):
    """String tests added in RocketMQ 5.x; their argument is a string literal."""

    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"


ORDER_OPS = frozenset({CompareOp.GT, CompareOp.GE, CompareOp.LT, CompareOp.LE})


@dataclass(frozen=True, slots=True)
class Null:
    pass


@dataclass(frozen=True, slots=True)
class Bool:
    value: bool


@dataclass(frozen=True, slots=True)
class Number:
    value: int | float


@dataclass(frozen=True, slots=True)
class String:
    value: str


@dataclass(frozen=True, slots=True)
class Property:
    name: str


@dataclass(frozen=True, slots=True)
class Negate:
    """``-x`` of anything but a number literal: a number stays a number, the rest is NULL."""

    operand: Expr


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In:
    operand: Property
    values: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Match:
    op: MatchOp
    operand: Expr
    pattern: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Expr, ...]


Expr = Union[
    Null, Bool, Number, String, Property, Negate, Compare, Between, In, IsNull, Match, Not, And, Or
]
Literal = (Null, Bool, Number, String)
CONDITIONS = (Null, Bool, Compare, Between, In, IsNull, Match, Not, And, Or)


def is_condition(node: Expr) -> bool:
    """RocketMQ's `BooleanExpression`: a node whose value is TRUE, FALSE or NULL."""
    return isinstance(node, CONDITIONS)


def children(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, (And, Or)):
        return node.operands
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Between):
        return (node.operand, node.low, node.high)
    if isinstance(node, (Negate, In, IsNull, Match, Not)):
        return (node.operand,)
    return ()


def walk(node: Expr) -> Iterator[tuple[Expr, int]]:
    """Every node with its depth (the root is 1), without recursion: trees may be deep."""
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        yield current, depth
        stack.extend((child, depth + 1) for child in children(current))


def depth(node: Expr) -> int:
    return max(d for _, d in walk(node))

