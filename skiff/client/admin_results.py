"""What the admin API returns: one immutable row type per question, with the
numbers RocketMQ's mqadmin prints (offsets, lag, versions, connections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker process: its group, id (0 = master), address and, when it answered,
    its runtime table (``brokerVersionDesc``, ``msgPutTotalTodayNow``, ...)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None
    """Why the runtime table is missing (the broker did not answer)."""

    @property
    def version(self) -> str:
        return self.runtime.get("brokerVersionDesc", "")


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue of a topic: its offsets and when its last message was stored (ms, 0 if never)."""

    mq: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """How far a group has consumed one queue."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    """Store time of the last consumed message (ms; 0 when none)."""

    @property
    def lag(self) -> int:
        return max(self.broker_offset - self.consumer_offset, 0)


@dataclass(frozen=True, slots=True)
class ConsumerProgress:
    group: str
    queues: tuple[QueueProgress, ...]
    consume_tps: float = 0.0

    @property
    def total_lag(self) -> int:
        return sum(q.lag for q in self.queues)


@dataclass(frozen=True, slots=True)
class ClientConnection:
    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumerConnections:
    """The live members of a consumer group and what they subscribe to."""

    group: str
    connections: tuple[ClientConnection, ...]
    subscriptions: Mapping[str, SubscriptionData]
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None
