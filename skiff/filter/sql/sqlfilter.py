"""A SQL92 subscription, parsed and compiled once, judged per message.

Besides the exact check, a SQL filter derives a tag-code pre-filter when the
expression can only be true for certain tags — ``TAGS = 'a' AND x > 1`` or
``TAGS IN ('a', 'b') OR TAGS = 'c'`` — so the broker skips ConsumeQueue entries
of other tags without reading their properties, as it does for tag filters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from skiff.common.hashing import tag_hash
from skiff.common.properties import Prop, decode_properties
from skiff.filter.api import ExpressionType
from skiff.filter.raw import PropertyReader, RawProperties
from skiff.filter.sql.ast import And, Compare, CompareOp, Expr, In, Or, Property, String, walk
from skiff.filter.sql.compiler import compile_condition
from skiff.filter.sql.parser import parse_sql
from skiff.filter.sql.printer import to_sql


@dataclass(frozen=True, slots=True)
class SqlFilter:
    """A compiled SQL92 selector; build it with `SqlFilter.compile` (or `build_filter`)."""

    expression: str
    tree: Expr
    expression_type: ExpressionType = field(default=ExpressionType.SQL92, init=False)
    tag_codes: frozenset[int] | None = field(init=False)
    needs_properties: bool = field(default=True, init=False)
    _test: Callable[[Mapping[str, str]], bool | None] = field(init=False, repr=False, compare=False)
    _reader: PropertyReader = field(init=False, repr=False, compare=False)
    _properties_of: Callable[[RawProperties], Mapping[str, str]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        tags = required_tags(self.tree)
        codes = None if tags is None else frozenset(tag_hash(t) for t in tags)
        object.__setattr__(self, "tag_codes", codes)
        object.__setattr__(self, "_test", compile_condition(self.tree))
        names = [n.name for n, _ in walk(self.tree) if isinstance(n, Property)]
        reader = PropertyReader(names)
        object.__setattr__(self, "_reader", reader)
        # Names used once are searched for lazily, so AND/OR that stop early skip
        # them; when a name is used again, decoding everything once is cheaper.
        read_once = len(names) == len(set(names))
        object.__setattr__(self, "_properties_of", reader.view if read_once else decode_properties)

    @classmethod
    def compile(cls, expression: str) -> SqlFilter:
        """Parse, check and compile; raises FilterSyntaxError with the position of a mistake."""
        return cls(expression, parse_sql(expression))

    @property
    def canonical(self) -> str:
        """The expression re-printed from its tree, for logs and admin answers."""
        return to_sql(self.tree)

    @property
    def property_names(self) -> tuple[str, ...]:
        return self._reader.names

    def matches(self, properties: Mapping[str, str]) -> bool:
        return self._test(properties) is True

    def matches_raw(self, raw_properties: RawProperties) -> bool:
        return self._test(self._properties_of(raw_properties)) is True


def required_tags(node: Expr) -> frozenset[str] | None:
    """Tags a message must carry for `node` to be true, or None when any may do."""
    if isinstance(node, Compare) and node.op is CompareOp.EQ:
        sides = (node.left, node.right)
        texts = [s.value for s in sides if isinstance(s, String)]
        if texts and any(isinstance(s, Property) and s.name == Prop.TAGS for s in sides):
            return frozenset(texts)
        return None
    if isinstance(node, In) and not node.negated and node.operand.name == Prop.TAGS:
        return frozenset(node.values)
    if isinstance(node, And):
        known = [t for t in map(required_tags, node.operands) if t is not None]
        return frozenset.intersection(*known) if known else None
    if isinstance(node, Or):
        options = [required_tags(o) for o in node.operands]
        if any(t is None for t in options):
            return None
        return frozenset().union(*options)  # type: ignore[arg-type]
    return None
