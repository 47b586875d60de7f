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


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(Header):
    """msgId is the offsetMsgId (comma-joined for a batch); queueOffset is the first message's."""

    msg_id: str
    queue_id: Int32
    queue_offset: int
    transaction_id: str | None = None
