"""One entry point from a subscription (expression, type) to a compiled filter.

Brokers see the same subscription on every heartbeat and every pull, so
compiled filters are cached by (type, expression), as RocketMQ's
`SelectorParser` caches its parses; the cache is bounded by
`FILTER_CACHE_MAX_ENTRIES` and drops the least recently used. Like RocketMQ,
it keeps failures too: a consumer that pulls with a bad expression is told so
on every pull, and a long bad expression must not be re-parsed each time.
"""

from __future__ import annotations

import functools

from skiff.common.limits import FILTER_CACHE_MAX_ENTRIES
from skiff.filter.api import ExpressionType, FilterError, MessageFilter
from skiff.filter.sql.sqlfilter import SqlFilter
from skiff.filter.tags import parse_tags


def build_filter(
    expression: str | None, expression_type: str | ExpressionType | None = ExpressionType.TAG
) -> MessageFilter:
    """The filter for a subscription; a missing or empty type means TAG, as in RocketMQ.

    Raises FilterSyntaxError (a FilterError) for a bad expression and
    FilterError for an unknown type; the broker answers both with
    SUBSCRIPTION_PARSE_FAILED and the error's message.
    """
    result = _build(expression_type_of(expression_type), expression)
    if isinstance(result, FilterError):
        raise result.with_traceback(None)
    return result


def expression_type_of(value: str | ExpressionType | None) -> ExpressionType:
    if isinstance(value, ExpressionType):
        return value
    if not value:
        return ExpressionType.TAG
    try:
        return ExpressionType(value.strip().upper())
    except ValueError:
        raise FilterError(f"unsupported expression type {value!r}: expected TAG or SQL92") from None


@functools.lru_cache(maxsize=FILTER_CACHE_MAX_ENTRIES)
def _build(kind: ExpressionType, expression: str | None) -> MessageFilter | FilterError:
    try:
        if kind is ExpressionType.TAG:
            return parse_tags(expression)
        return SqlFilter.compile(expression or "")
    except FilterError as e:
        return e
