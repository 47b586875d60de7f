"""Subscriptions as the store reads them: a filter compiled once, and the per-record test
a property filter (SQL92) needs.

Every consuming operation (pull, pop, gRPC receive and pull) and the heartbeat's check
of a registered subscription compile through `compile_subscription`, so a filter is
refused alike wherever it arrives.
"""

from __future__ import annotations

import struct

from skiff.broker.operations.refusal import Refusal
from skiff.common.errors import DecodeError
from skiff.common.record import SYSFLAG_AT, head_struct_for
from skiff.filter import ExpressionType, FilterError, MessageFilter, build_filter
from skiff.filter.factory import expression_type_of
from skiff.protocol.codes import ResponseCode
from skiff.store.reads import RecordFilter

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def compile_subscription(expression: str | None, kind: str | None,
                         enable_property_filter: bool) -> MessageFilter | Refusal:
    """The filter of a subscription, or why it is refused (RocketMQ's codes): a type other
    than TAG on a broker without ``enablePropertyFilter`` is SYSTEM_ERROR; an expression
    that does not parse is SUBSCRIPTION_PARSE_FAILED with the parser's message, which
    gives the position. Compiled filters are cached by `build_filter`, so a subscription
    seen on every heartbeat and every pull is parsed once."""
    try:
        expression_type = expression_type_of(kind)
        if expression_type is not ExpressionType.TAG and not enable_property_filter:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"this broker does not filter by {expression_type.value}: "
                                                      f"set enablePropertyFilter=true to allow it")
        return build_filter(expression, expression_type)
    except FilterError as exc:
        return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))


def record_filter(flt: MessageFilter) -> RecordFilter | None:
    """The store's per-record test for a filter that reads properties (SQL92), else None."""
    if not flt.needs_properties:
        return None
    matches_raw = flt.matches_raw

    def test(record: memoryview) -> bool:
        return matches_raw(properties_of(record))
    return test


def properties_of(record: memoryview) -> memoryview:
    """The raw properties of a stored record, found from its three length fields (body,
    topic, properties) without decoding the rest: a filtered pull does this for every
    candidate, and it costs a quarter of `read_head` plus `read_tail`."""
    body_pos = head_struct_for(_I32.unpack_from(record, SYSFLAG_AT)[0]).size
    p = body_pos + _I32.unpack_from(record, body_pos - _I32.size)[0]  # BODY length: the int32 before the body
    if not body_pos <= p < len(record):
        raise DecodeError(f"a record's body length {p - body_pos} overruns it")
    p += 1 + record[p]
    end = p + 2 + _I16.unpack_from(record, p)[0] if p + 2 <= len(record) else -1
    if end != len(record):
        raise DecodeError("a record's topic and properties lengths do not add up to its size")
    return record[p + 2 : end]
