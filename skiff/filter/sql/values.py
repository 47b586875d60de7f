"""How SQL92 values compare: RocketMQ's `ComparisonExpression` rules, made total.

Values during evaluation are None (a missing property, NULL, or unknown),
``str`` (every property), ``int``/``float`` (literals and numbers read from
properties) and ``bool`` (TRUE, FALSE, results of conditions).

- A number meets a string: the string is read as a number (`to_number`). Text
  that is not a number makes the comparison unknown, like a missing property;
  RocketMQ throws there and the whole message is rejected.
- A boolean meets a string: the string is true when it is "true" in any case
  (Java's `Boolean.valueOf`), so ``flag = TRUE`` works on a property "True".
- Two strings: ``=`` and ``<>`` compare text; ``> >= < <=`` read both as numbers.
- A boolean meets a number: never equal (RocketMQ's fallback).
- Unknown on either side of a comparison makes it unknown; RocketMQ's result
  is asymmetric there (docs/filter.md).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from skiff.filter.sql.ast import CompareOp

Value = str | int | float | bool | None
LONG_MAX = 2**63 - 1
_LONG_DIGITS = 18
"""Unsigned digit strings this long always fit in a long: the fast path."""

_NUMBER = re.compile(
    r"[+-]?(?:[0-9]+(?P<point>\.[0-9]*)?|(?P<lead>\.[0-9]+))(?P<exp>[eE][+-]?[0-9]+)?"
)

ORDER: dict[CompareOp, Callable[[Any, Any], bool]] = {
    CompareOp.GT: operator.gt,
    CompareOp.GE: operator.ge,
    CompareOp.LT: operator.lt,
    CompareOp.LE: operator.le,
}
FLIPPED = {
    CompareOp.GT: CompareOp.LT,
    CompareOp.GE: CompareOp.LE,
    CompareOp.LT: CompareOp.GT,
    CompareOp.LE: CompareOp.GE,
    CompareOp.EQ: CompareOp.EQ,
    CompareOp.NE: CompareOp.NE,
}
"""The operator that gives the same answer with its sides swapped."""


def to_number(text: str) -> int | float | None:
    """Property text as a number: a long when it is an integer that fits, else a double.

    Accepted: optional sign, ASCII digits, optional fraction, optional exponent
    (``12``, ``-3``, ``+4.5``, ``.5``, ``6.``, ``1e9``). Anything else — blanks,
    ``NaN``, hex, other scripts' digits — is not a number.
    """
    if len(text) <= _LONG_DIGITS and text.isdigit() and text.isascii():
        return int(text)
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    if match["point"] is None and match["lead"] is None and match["exp"] is None:
        digits = len(text.lstrip("+-").lstrip("0"))
        if digits <= _LONG_DIGITS + 1 and abs(value := int(text)) <= LONG_MAX:
            return value
    return float(text)


def is_number(value: Value) -> TypeGuard[int | float]:
    kind = type(value)
    return kind is int or kind is float


def as_number(value: Value) -> int | float | None:
    """The number a value stands for in ``> >= < <=``, or None (unknown)."""
    if type(value) is str:
        return to_number(value)
    return value if is_number(value) else None


def string_is_true(text: str) -> bool:
    """Java's `Boolean.valueOf(String)`."""
    return len(text) == 4 and text.lower() == "true"


def equal(left: Value, right: Value) -> bool | None:
    """``=``: True, False, or None when either side is unknown."""
    if left is None or right is None:
        return None
    left_kind, right_kind = type(left), type(right)
    if left_kind is right_kind or (is_number(left) and is_number(right)):
        return left == right
    if left_kind is str:
        return _string_equal(left, right)  # type: ignore[arg-type]
    if right_kind is str:
        return _string_equal(right, left)  # type: ignore[arg-type]
    return False


def _string_equal(text: str, other: Value) -> bool | None:
    if type(other) is bool:
        return string_is_true(text) is other
    number = to_number(text)
    return None if number is None else number == other


def compare(op: CompareOp, left: Value, right: Value) -> bool | None:
    """Any comparison operator over two values."""
    if op is CompareOp.EQ:
        return equal(left, right)
    if op is CompareOp.NE:
        return negate_condition(equal(left, right))
    left_number, right_number = as_number(left), as_number(right)
    if left_number is None or right_number is None:
        return None
    return ORDER[op](left_number, right_number)


def negate_condition(value: bool | None) -> bool | None:
    return None if value is None else not value


def negate_value(value: Value) -> Value:
    """Unary minus: numbers only; anything else is unknown (RocketMQ returns null)."""
    return -value if is_number(value) else None


def as_condition(value: Value) -> bool | None:
    """RocketMQ's boolean cast of a bare property: present is FALSE, missing is NULL."""
    if value is None or type(value) is bool:
        return value
    return False


MATCHERS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda text, pattern: pattern in text,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def string_match(kind: str, value: Value, pattern: str, negated: bool) -> bool:
    """RocketMQ 5.x CONTAINS/STARTSWITH/ENDSWITH: never unknown, false for non-strings
    and for an empty pattern, with or without NOT."""
    if type(value) is not str or not pattern:
        return False
    return MATCHERS[kind](value, pattern) is not negated
