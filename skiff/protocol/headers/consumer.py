"""Headers of the consumer-management and queue-offset requests.

QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_CONSUMER_LIST_BY_GROUP (38),
UNREGISTER_CLIENT (35), CONSUMER_SEND_MSG_BACK (36), GET_MAX/MIN_OFFSET (30/31),
SEARCH_OFFSET_BY_TIMESTAMP (29) and GET_EARLIEST_MSG_STORETIME (32). Every
response value goes out as a string, and these responses always carry extFields
(the C++ client dereferences them unchecked).
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: Int32
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    """Sent "oneway" by clients, but the C++ client's oneway frames arrive with flag 0."""

    consumer_group: str
    topic: str
    queue_id: Int32
    commit_offset: int
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader(Header):
    """The C++ client sends the group it does not use as ""; that reads as None."""

    WIRE_NAMES = {"client_id": "clientID"}

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    """``offset`` is the CommitLog offset of the message to retry; ``delayLevel`` 0 means 3 + reconsumeTimes."""

    offset: int
    group: str
    delay_level: Int32
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: Int32 | None = None
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class QueueRequestHeader(Header):
    """One queue of a topic: GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME.

    Java has a class per code (GetMaxOffsetRequestHeader, ...) with these same fields.
    """

    topic: str
    queue_id: Int32
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: Int32
    timestamp: int
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetResponseHeader(Header):
    """An offset: the answer to QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET (the next logical
    offset, the queue's entry count), GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int


@dataclass(frozen=True, slots=True)
class GetEarliestMsgStoretimeResponseHeader(Header):
    timestamp: int
