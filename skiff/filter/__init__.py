"""Message filters shared by broker and client: tag expressions and SQL92 selectors.

Call `build_filter(expression, expression_type)` with what a subscription
carries and use the `MessageFilter` it returns: `tag_codes` for the
ConsumeQueue pre-filter, `matches_raw` on stored properties bytes (broker),
`matches` on a decoded properties mapping (client). docs/filter.md has the
grammar and the evaluation rules.
"""

from skiff.filter.api import ExpressionType, FilterError, FilterSyntaxError, MessageFilter, Position
from skiff.filter.factory import build_filter
from skiff.filter.sql.sqlfilter import SqlFilter
from skiff.filter.tags import TagFilter, parse_tags

__all__ = [
    "ExpressionType",
    "FilterError",
    "FilterSyntaxError",
    "MessageFilter",
    "Position",
    "SqlFilter",
    "TagFilter",
    "build_filter",
    "parse_tags",
]
