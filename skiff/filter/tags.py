"""Tag subscriptions: ``*`` or ``TagA || TagB``.

Read as RocketMQ's `FilterAPI.buildSubscriptionData` reads them: split on
``||``, trim each tag, drop empty pieces. The broker compares ConsumeQueue tag
codes with `tag_codes` (hash collisions let a few strangers through) and the
client re-checks the exact TAGS string, so `needs_properties` is false.

Two leniencies, both documented in docs/filter.md: surrounding whitespace does
not stop ``*`` from meaning "everything" (RocketMQ would look for a tag named
``*``), and an expression such as ``||`` that names no tag is an error instead
of a subscription that silently receives nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.common.hashing import tag_hash
from skiff.common.properties import Prop
from skiff.filter.api import ExpressionType, FilterSyntaxError, Position
from skiff.filter.raw import PropertyReader, RawProperties

SUB_ALL = "*"
TAG_SEPARATOR = "||"

_TAGS_READER = PropertyReader([Prop.TAGS])


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A tag subscription; `tags` is None when it takes every message."""

    expression: str
    tags: frozenset[str] | None
    tag_codes: frozenset[int] | None = field(init=False)
    expression_type: ExpressionType = field(default=ExpressionType.TAG, init=False)
    needs_properties: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        codes = None if self.tags is None else frozenset(tag_hash(t) for t in self.tags)
        object.__setattr__(self, "tag_codes", codes)

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self.tags is None or properties.get(Prop.TAGS) in self.tags

    def matches_raw(self, raw_properties: RawProperties) -> bool:
        if self.tags is None:
            return True
        return _TAGS_READER.view(raw_properties).get(Prop.TAGS) in self.tags

    def matches_tag(self, tags: str | None) -> bool:
        """The client's exact re-check, given a message's TAGS value."""
        return self.tags is None or tags in self.tags


def parse_tags(expression: str | None) -> TagFilter:
    """Compile a tag expression; None, empty, blank and ``*`` take every message."""
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return TagFilter(SUB_ALL, None)
    tags = frozenset(t.strip() for t in text.split(TAG_SEPARATOR) if t.strip())
    if not tags:
        raise FilterSyntaxError(
            f"tag expression {expression!r} names no tag: write '*' or tags joined by '||'",
            Position(1, 1, 0),
            ("a tag", "'*'"),
        )
    return TagFilter(expression or SUB_ALL, tags)
