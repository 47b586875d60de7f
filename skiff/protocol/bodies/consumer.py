"""Bodies about consumer groups: members, connections, consume progress.

GET_CONSUMER_LIST_BY_GROUP (38) answers `ConsumerIdList`;
GET_CONSUMER_CONNECTION_LIST (203) answers `ConsumerConnection`;
GET_PRODUCER_CONNECTION_LIST (204) answers `ProducerConnection`;
GET_CONSUME_STATS (208) answers `ConsumeStats`; QUERY_CONSUME_TIME_SPAN (303)
answers `QueryConsumeTimeSpanBody`. Maps keyed by `MessageQueue` are written in
fastjson's form (object keys), as Java's broker writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from skiff.protocol.codes import LanguageCode


@dataclass(frozen=True, slots=True)
class ConsumerIdList(JsonBody):
    """Java's GetConsumerListByGroupResponseBody: the clientIDs of a group's live consumers.

    It must hold the asking client's own id, or that client is given no queues.
    """

    consumer_id_list: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Connection(JsonBody):
    client_id: str
    client_addr: str
    language: LanguageCode
    version: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerConnection(JsonBody):
    connection_set: tuple[Connection, ...] = ()
    subscription_table: Mapping[str, SubscriptionData] = field(default_factory=dict)
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None


@dataclass(frozen=True, slots=True)
class ProducerConnection(JsonBody):
    """GET_PRODUCER_CONNECTION_LIST's answer: the connections of a producer group."""

    connection_set: tuple[Connection, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetWrapper(JsonBody):
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int = 0
    """RocketMQ 5's: where the group reads next (a POP group's cursor), at least the consumer offset."""
    in_flight: int = 0
    """Skiff's: a POP group's messages popped and not yet acknowledged (hidden for their invisible time)."""


@dataclass(frozen=True, slots=True)
class ConsumeStats(JsonBody):
    """Per queue, the broker's max offset and the group's committed offset."""

    offset_table: Mapping[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def total_diff(self) -> int:
        """Messages the group has not consumed yet, over all queues (Java's computeTotalDiff)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(frozen=True, slots=True)
class QueueTimeSpan(JsonBody):
    message_queue: MessageQueue
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanBody(JsonBody):
    consume_time_span_set: tuple[QueueTimeSpan, ...] = ()
