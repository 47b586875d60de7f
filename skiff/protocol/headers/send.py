"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) headers.

Code 10 carries the V1 names; codes 310 and 320 carry V2's one-letter keys
a..n. `SendMessageRequestHeaderV2` subclasses the V1 class and only renames
the keys, so the broker handles one type: `decode_send_request` reads either.

Whether the body is a batch is decided by the ``batch``/``m`` field, never by
the code: the C++ client sends batches on code 10 with ``batch`` = "1" (Java's
broker reads "1" as false; Skiff reads it as the client means it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import NamedTuple

from skiff.common import kernels
from skiff.common.config import snake_to_camel
from skiff.protocol.codes import RequestCode
from skiff.protocol.headers.base import Header, Int32

V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})
"""Request codes whose header uses V2's one-letter keys (Java's parseRequestHeader)."""


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeader(Header):
    """Java's SendMessageRequestHeader (V1 names)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: Int32
    queue_id: Int32
    sys_flag: Int32
    born_timestamp: int
    flag: Int32
    properties: str | None = None
    reconsume_times: Int32 | None = None
    unit_mode: bool = False
    batch: bool = False
    max_reconsume_times: Int32 | None = None
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class SendMessageRequestHeaderV2(SendMessageRequestHeader):
    """Java's SendMessageRequestHeaderV2: the same fields under one-letter keys."""

    WIRE_NAMES = {
        "producer_group": "a",
        "topic": "b",
        "default_topic": "c",
        "default_topic_queue_nums": "d",
        "queue_id": "e",
        "sys_flag": "f",
        "born_timestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsume_times": "j",
        "unit_mode": "k",
        "max_reconsume_times": "l",
        "batch": "m",
        "bname": "n",
    }

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(*[getattr(self, name) for name in _FIELDS])

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(*[getattr(v1, name) for name in _FIELDS])


_FIELDS = tuple(f.name for f in fields(SendMessageRequestHeader))


def decode_send_request(code: int, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    """The send header of a request on any send code.

    For V2 codes this is a `SendMessageRequestHeaderV2`, which is a
    `SendMessageRequestHeader` with the same fields (only its wire names
    differ), so callers handle one type at no conversion cost; ``to_v1()``
    gives the exact V1 class when one is needed (e.g. to re-encode with V1 names).
    """
    if code in V2_CODES:
        return SendMessageRequestHeaderV2.from_ext(ext)
    return SendMessageRequestHeader.from_ext(ext)


class SendFields(NamedTuple):
    """What a broker's send takes from a send header, in `send_fields`' order."""

    topic: str
    queue_id: int
    properties: str
    flag: int
    sys_flag: int
    born_timestamp: int
    reconsume_times: int
    batch: bool
    default_topic: str
    default_topic_queue_nums: int


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_V1_WIRE = tuple(snake_to_camel(name) for name in _FIELDS)
_V2_WIRE = tuple(SendMessageRequestHeaderV2.WIRE_NAMES[name] for name in _FIELDS)


def _number(raw: str | None, bounds: tuple[int, int]) -> int | None:
    """Plain ASCII digits with an optional minus, at most 18 of them (the compiled twin reads
    the same), within ``bounds``; anything else is left to the header decode."""
    if raw is None or not raw.isascii() or not 0 < len(raw.removeprefix("-")) <= 18 \
            or not raw.removeprefix("-").isdigit():
        return None
    v = int(raw)
    return v if bounds[0] <= v <= bounds[1] else None


def _flag(raw: str | None) -> bool | None:
    if raw is None or raw == "false" or raw == "0" or raw == "":
        return False
    return True if raw == "true" or raw == "1" else None


def send_fields_py(code: int, ext: Mapping[str, str] | None) -> SendFields | None:
    """The fields a send needs, read straight from ``ext`` (one dict lookup each, no header
    object: the single-send path runs this once per request), or None when the header is not
    one this reads exactly as `decode_send_request` would (a missing field, a fraction, a value
    out of range, an unusual boolean): the caller then decodes it with `decode_send_request`,
    which also says what is wrong. Every field `decode_send_request` checks is checked."""
    if ext is None:
        return None
    group, topic, template, queue_nums, queue_id, sys_flag, born, flag, props, reconsume, unit, batch, \
        max_reconsume, _ = map(ext.get, _V2_WIRE if code in V2_CODES else _V1_WIRE)
    if group is None or topic is None or template is None:
        return None
    nums, qid, sflag, born_ms, fl = (_number(queue_nums, _INT32), _number(queue_id, _INT32),
                                     _number(sys_flag, _INT32), _number(born, _INT64), _number(flag, _INT32))
    if nums is None or qid is None or sflag is None or born_ms is None or fl is None:
        return None
    reconsume_times = 0 if not reconsume else _number(reconsume, _INT32)
    unit_mode, is_batch = _flag(unit), _flag(batch)
    if reconsume_times is None or unit_mode is None or is_batch is None or (
            max_reconsume and _number(max_reconsume, _INT32) is None):
        return None
    return SendFields(topic, qid, props or "", fl, sflag, born_ms, reconsume_times, is_batch, template, nums)


send_fields = kernels.select("send_fields", send_fields_py, "skiff.protocol._frames")
"""`send_fields_py`, compiled where built (a plain tuple of the same fields)."""


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(Header):
    """msgId is the offsetMsgId (comma-joined for a batch); queueOffset is the first message's."""

    msg_id: str
    queue_id: Int32
    queue_offset: int
    transaction_id: str | None = None
