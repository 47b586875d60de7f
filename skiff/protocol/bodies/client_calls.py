"""Bodies of the broker's calls to clients (and the admin requests that lead to them).

RESET_CONSUMER_CLIENT_OFFSET (220) carries a `ResetOffsetBody` (and so does the
answer to INVOKE_BROKER_TO_RESET_OFFSET, 222); GET_CONSUMER_RUNNING_INFO (307)
is answered with a `ConsumerRunningInfo`; GET_CONSUMER_STATUS_FROM_CLIENT (221)
with a `GetConsumerStatusBody`.

The C++ client reads a reset body only as a list of queues with offsets (Java's
ResetOffsetBodyForC): send it `ResetOffsetBody.to_json_for_cpp()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody
from skiff.protocol.bodies.heartbeat import SubscriptionData


@dataclass(frozen=True, slots=True)
class MessageQueueForC(JsonBody):
    """One queue and its offset, as the C++ client reads a reset."""

    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class ResetOffsetBodyForC(JsonBody):
    offset_table: tuple[MessageQueueForC, ...] = ()


@dataclass(frozen=True, slots=True)
class ResetOffsetBody(JsonBody):
    """The offset each queue of a group resets to."""

    offset_table: Mapping[MessageQueue, int] = field(default_factory=dict)

    @classmethod
    def from_obj(cls, raw: Any, path: str | None = None) -> Self:
        """Also reads the C++ form (`ResetOffsetBodyForC`)."""
        if isinstance(raw, Mapping) and isinstance(raw.get("offsetTable"), list):
            for_c = ResetOffsetBodyForC.from_obj(raw, path or cls.__name__)
            return cls({MessageQueue(q.topic, q.broker_name, q.queue_id): q.offset for q in for_c.offset_table})
        return super(ResetOffsetBody, cls).from_obj(raw, path)

    def to_json_for_cpp(self) -> bytes:
        return ResetOffsetBodyForC(
            tuple(MessageQueueForC(mq.topic, mq.broker_name, mq.queue_id, off) for mq, off in self.offset_table.items())
        ).to_json()


@dataclass(frozen=True, slots=True)
class ProcessQueueInfo(JsonBody):
    """A consumer's view of one queue it holds."""

    WIRE_NAMES = {"cached_msg_size_mib": "cachedMsgSizeInMiB"}

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumeStatus(JsonBody):
    WIRE_NAMES = {
        "pull_rt": "pullRT",
        "pull_tps": "pullTPS",
        "consume_rt": "consumeRT",
        "consume_ok_tps": "consumeOKTPS",
        "consume_failed_tps": "consumeFailedTPS",
    }

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0


_CPP_EMPTY_MQ_TABLE = b'{"mqTable":},'


@dataclass(frozen=True, slots=True)
class ConsumerRunningInfo(JsonBody):
    """What a consumer reports about itself: settings, subscriptions, queues, rates.

    ``properties`` holds Java's PROP_* keys (PROP_CONSUME_TYPE, PROP_CLIENT_VERSION, ...).
    """

    properties: Mapping[str, str] = field(default_factory=dict)
    subscription_set: tuple[SubscriptionData, ...] = ()
    mq_table: Mapping[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: Mapping[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> Self:
        """Also reads the C++ client's answer for a consumer holding no queue.

        It splices ``"mqTable":`` + ``}`` into its JSON by hand and, with no
        queue, writes ``{"mqTable":},...``; that is read as an empty table.
        """
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if raw.startswith(_CPP_EMPTY_MQ_TABLE):
            raw = b'{"mqTable":{},' + raw[len(_CPP_EMPTY_MQ_TABLE) :]
        return super(ConsumerRunningInfo, cls).from_json(raw)


@dataclass(frozen=True, slots=True)
class GetConsumerStatusBody(JsonBody):
    """Offsets per queue, for one client (``messageQueueTable``) or per client id (``consumerTable``)."""

    message_queue_table: Mapping[MessageQueue, int] = field(default_factory=dict)
    consumer_table: Mapping[str, Mapping[MessageQueue, int]] = field(default_factory=dict)
