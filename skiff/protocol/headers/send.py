"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) headers.

Code 10 carries the V1 names; codes 310 and 320 carry V2's one-letter keys
a..n. The broker handles one type: `decode_send_request` turns either into a
`SendMessageRequestHeader`. Whether the body is a batch is decided by the
``batch``/``m`` field, never by the code: the C++ client sends batches on code
10 with ``batch`` = "1" (Java's broker reads "1" as false; Skiff reads it as
the client means it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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
class SendMessageRequestHeaderV2(Header):
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
    max_reconsume_times: Int32 | None = None
    batch: bool = False
    bname: str | None = None

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            self.producer_group, self.topic, self.default_topic, self.default_topic_queue_nums,
            self.queue_id, self.sys_flag, self.born_timestamp, self.flag, self.properties,
            self.reconsume_times, self.unit_mode, self.batch, self.max_reconsume_times, self.bname,
        )

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(
            v1.producer_group, v1.topic, v1.default_topic, v1.default_topic_queue_nums,
            v1.queue_id, v1.sys_flag, v1.born_timestamp, v1.flag, v1.properties,
            v1.reconsume_times, v1.unit_mode, v1.max_reconsume_times, v1.batch, v1.bname,
        )


def decode_send_request(code: int, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    """The send header of a request on any send code, as V1."""
    if code in V2_CODES:
        return SendMessageRequestHeaderV2.from_ext(ext).to_v1()
    return SendMessageRequestHeader.from_ext(ext)


@dataclass(frozen=True, slots=True)
class SendMessageResponseHeader(Header):
    """msgId is the offsetMsgId (comma-joined for a batch); queueOffset is the first message's."""

    msg_id: str
    queue_id: Int32
    queue_offset: int
    transaction_id: str | None = None
