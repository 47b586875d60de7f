"""What every message filter offers, and the errors a bad expression raises.

Brokers and clients hold filters only through `MessageFilter`, so a tag filter
and a compiled SQL92 filter are interchangeable at the call site: the broker
first checks ConsumeQueue tag codes against `tag_codes` (a cheap integer test on
arrays of entries), then, when `needs_properties` is true, calls `matches_raw`
on the stored properties bytes of each candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import NamedTuple, Protocol, runtime_checkable

from skiff.common.errors import SkiffError


class ExpressionType(str, Enum):
    """RocketMQ's `ExpressionType`: how a subscription string is to be read."""

    TAG = "TAG"
    SQL92 = "SQL92"


class Position(NamedTuple):
    """Where in an expression an error was found: 1-based line and column, 0-based offset."""

    line: int
    column: int
    offset: int


class FilterError(SkiffError):
    """A subscription cannot be turned into a filter (bad type, bad expression).

    The broker answers these with SUBSCRIPTION_PARSE_FAILED and the message as
    the remark, so the message is written for the person who typed the expression.
    """


class FilterSyntaxError(FilterError):
    """An expression does not parse, or parses into something RocketMQ rejects.

    `position` points at the offending token (at the end of the text when the
    expression stops too early); `expected` names, in words, what would have
    been accepted there.
    """

    def __init__(self, message: str, position: Position, expected: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.expected = expected

    def __reduce__(self) -> tuple[type[FilterSyntaxError], tuple[str, Position, tuple[str, ...]]]:
        # Pickled with its fields (the default would replay only the message):
        # Spark ships errors from executors to the driver this way.
        return (type(self), (self.message, self.position, self.expected))


@runtime_checkable
class MessageFilter(Protocol):
    """A compiled subscription, shared by the broker (pull) and the client (re-check).
    Its fields are read-only (the filters are frozen dataclasses)."""

    @property
    def expression(self) -> str: ...

    @property
    def expression_type(self) -> ExpressionType: ...

    @property
    def tag_codes(self) -> frozenset[int] | None:
        """ConsumeQueue tag codes (`skiff.common.hashing.tag_hash`) that can match; None = any."""
        ...

    @property
    def needs_properties(self) -> bool:
        """False when the tag-code pre-filter plus the client's exact tag check suffice."""
        ...

    def matches(self, properties: Mapping[str, str]) -> bool:
        """The exact answer for a message with these properties (TAGS included)."""
        ...

    def matches_raw(self, raw_properties: bytes | bytearray | memoryview) -> bool:
        """The same answer from the stored properties bytes, without decoding them all."""
        ...
