"""What the admin API returns: one immutable row type per question, with the
numbers RocketMQ's mqadmin prints (offsets, lag, versions, connections)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.compaction import TopicCompactionBody
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from skiff.protocol.bodies.tier import TopicTierBody
from skiff.protocol.bodies.timer import CancelStatus, TimerSlot, TimerStatsBody
from skiff.protocol.mq_version import version_name


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
    pull_offset: int = 0
    """Where the group reads next (a POP group's cursor: past what it popped); at least the
    consumer offset."""
    in_flight: int = 0
    """A POP group's messages popped and not yet acknowledged."""

    @property
    def lag(self) -> int:
        """Messages the group has not consumed: those not yet read, and for a POP group those
        popped and not acknowledged (its committed offset, the lowest in flight, would count
        the acknowledged ones after it too)."""
        read = max(self.pull_offset, self.consumer_offset)
        if read == self.consumer_offset:
            return max(self.broker_offset - self.consumer_offset, 0)
        return max(self.broker_offset - read, 0) + self.in_flight


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
    """RocketMQ's MQVersion ordinal, as the protocol carries it (`version_name` is what tools show)."""

    @property
    def version_name(self) -> str:
        """The client's version as RocketMQ's tools show it (``V5_1_2``)."""
        return version_name(self.version)


@dataclass(frozen=True, slots=True)
class ConsumerConnections:
    """The live members of a consumer group and what they subscribe to."""

    group: str
    connections: tuple[ClientConnection, ...]
    subscriptions: Mapping[str, SubscriptionData]
    consume_type: ConsumeType | None = None
    message_model: MessageModel | None = None
    consume_from_where: ConsumeFromWhere | None = None


@dataclass(frozen=True, slots=True)
class BrokerCompaction:
    """One broker's answer about a topic's compaction; ``error`` says why it did not answer."""

    broker_name: str
    addr: str
    state: TopicCompactionBody | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerTier:
    """One broker's answer about a topic's tier; ``error`` says why it did not answer."""

    broker_name: str
    addr: str
    state: TopicTierBody | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerTimer:
    """One broker's timer: scheduled messages per slot of due times (earliest first) and
    its counters since the broker started; ``error`` says why a broker did not answer."""

    broker_name: str
    addr: str
    slot_ms: int = 0
    slots: tuple[TimerSlot, ...] = ()
    stats: TimerStatsBody = TimerStatsBody()
    error: str | None = None

    @property
    def scheduled(self) -> int:
        return sum(s.scheduled for s in self.slots)


@dataclass(frozen=True, slots=True)
class ScheduledCancel:
    """What a cancel did to one scheduled copy of the message, on one broker."""

    broker_name: str
    timer_id: int
    """The CommitLog offset of the parked record on that broker."""
    slot_start_ms: int
    due_ms: int
    status: CancelStatus


@dataclass(frozen=True, slots=True)
class CancelScheduledResult:
    """A cancel by message id over the brokers that could hold it.

    ``status`` is CANCELLED when any copy was cancelled, else the first other
    outcome, else NOT_FOUND; ``failures`` lists brokers that did not answer (the
    message may wait there, uncancelled).
    """

    msg_id: str
    status: CancelStatus
    outcomes: tuple[ScheduledCancel, ...] = ()
    failures: tuple[str, ...] = ()

    @property
    def will_not_be_delivered(self) -> bool:
        return self.status in (CancelStatus.CANCELLED, CancelStatus.ALREADY_CANCELLED) and not self.failures
