"""What every part of a consumer shares: its settings (RocketMQ's names, defaults
and bounds), its subscriptions, its client instance and offset store, the
send-back of a failed message, and the counters its running info reports.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skiff.client._impl.offset_store import OffsetStore
from skiff.client._impl.strategies import AllocateAverage, AllocateStrategy
from skiff.client.errors import ClientConfigError, NameServerUnavailableError
from skiff.client.results import MessageSelector
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.message import MessageQueue
from skiff.common.names import retry_topic, topic_error
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.filter import MessageFilter, TagFilter, build_filter
from skiff.protocol.bodies.client_calls import ConsumeStatus as ConsumeStatusInfo
from skiff.protocol.bodies.heartbeat import (
    SUB_ALL,
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from skiff.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader

if TYPE_CHECKING:
    from skiff.client._impl.instance import ClientInstance, ConsumerImpl

log = logging.getLogger(__name__)

HALF_AN_HOUR_MS = 30 * 60 * 1000
"""RocketMQ's default consumeTimestamp: start half an hour back."""

THREADS_RANGE = (1, 1000)
BATCH_RANGE = (1, 1024)
PULL_THRESHOLD_RANGE = (1, 65535)
PULL_THRESHOLD_MIB_RANGE = (1, 1024)
SPAN_RANGE = (1, 65535)
"""Bounds of the settings, as RocketMQ's DefaultMQPushConsumerImpl.checkConfig sets them."""

DLQ_DELAY_LEVEL = -1
"""A send-back with this delay level goes straight to the group's DLQ."""


def _check_range(name: str, value: int, bounds: tuple[int, int]) -> None:
    low, high = bounds
    if not low <= value <= high:
        raise ClientConfigError(f"{name} must be between {low} and {high}, not {value}")


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """A push or lite-pull consumer's settings (RocketMQ's DefaultMQPushConsumer fields)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp_ms: int | None = None
    """Where CONSUME_FROM_TIMESTAMP starts (ms since the epoch); None: half an hour before start."""
    allocate_strategy: AllocateStrategy = field(default_factory=AllocateAverage)
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int = 16
    suspend_current_queue_time_ms: int = 1000
    await_termination_ms: int = 5000
    """How long shutdown waits for listener calls already running."""
    offsets_dir: str | None = None
    """Broadcasting: the directory of the local offset files (None: ~/.skiff/offsets)."""

    def __post_init__(self) -> None:
        _check_range("consume_thread_min", self.consume_thread_min, THREADS_RANGE)
        _check_range("consume_thread_max", self.consume_thread_max, THREADS_RANGE)
        if self.consume_thread_min > self.consume_thread_max:
            raise ClientConfigError(f"consume_thread_min ({self.consume_thread_min}) is more than "
                                    f"consume_thread_max ({self.consume_thread_max})")
        _check_range("consume_message_batch_max_size", self.consume_message_batch_max_size, BATCH_RANGE)
        _check_range("pull_batch_size", self.pull_batch_size, BATCH_RANGE)
        _check_range("pull_threshold_for_queue", self.pull_threshold_for_queue, PULL_THRESHOLD_RANGE)
        _check_range("pull_threshold_size_for_queue_mib", self.pull_threshold_size_for_queue_mib,
                     PULL_THRESHOLD_MIB_RANGE)
        _check_range("consume_concurrently_max_span", self.consume_concurrently_max_span, SPAN_RANGE)
        if self.max_reconsume_times < -1:
            raise ClientConfigError(f"max_reconsume_times must be -1 (RocketMQ's default) or more, "
                                    f"not {self.max_reconsume_times}")
        if self.suspend_current_queue_time_ms < 0 or self.await_termination_ms < 0:
            raise ClientConfigError("suspend_current_queue_time_ms and await_termination_ms may not be negative")
        if not isinstance(self.message_model, MessageModel):
            object.__setattr__(self, "message_model", MessageModel[str(self.message_model).upper()])
        if not isinstance(self.consume_from_where, ConsumeFromWhere):
            object.__setattr__(self, "consume_from_where", ConsumeFromWhere[str(self.consume_from_where).upper()])

    @property
    def clustering(self) -> bool:
        return self.message_model == MessageModel.CLUSTERING

    @property
    def pull_threshold_size_bytes(self) -> int:
        return self.pull_threshold_size_for_queue_mib * 1024 * 1024

    def max_reconsume(self, orderly: bool) -> int:
        """-1 means RocketMQ's default: 16 for concurrent listeners, no limit for orderly ones."""
        if self.max_reconsume_times >= 0:
            return self.max_reconsume_times
        return 2**31 - 1 if orderly else 16


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int): the tag codes a Java broker expects."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic's subscription: the expression, its compiled filter and its version."""

    topic: str
    selector: MessageSelector
    filter: MessageFilter
    sub_version: int

    @classmethod
    def of(cls, topic: str, expression: str | MessageSelector | None, clock: Clock = SYSTEM_CLOCK) -> Subscription:
        """Validate and compile; a bad topic or expression raises here, at subscribe time."""
        problem = topic_error(topic)
        if problem:
            raise ClientConfigError(f"cannot subscribe: {problem}")
        if isinstance(expression, MessageSelector):
            selector = expression
        else:
            selector = MessageSelector.by_tag(expression)
        compiled = build_filter(selector.expression, selector.expression_type.value)
        return cls(topic, selector, compiled, clock.now_ms())

    @property
    def tags(self) -> frozenset[str] | None:
        """The exact tags a client re-checks (None: take every message the broker sends)."""
        return self.filter.tags if isinstance(self.filter, TagFilter) else None

    @property
    def expression(self) -> str:
        return self.selector.expression

    def to_data(self) -> SubscriptionData:
        tags = tuple(sorted(self.tags)) if self.tags else ()
        return SubscriptionData(
            topic=self.topic, sub_string=self.expression if self.tags is not None or
            self.selector.expression_type is ExpressionType.SQL92 else SUB_ALL,
            tags_set=tags, code_set=tuple(java_string_hash(t) for t in tags), sub_version=self.sub_version,
            expression_type=self.selector.expression_type,
        )


def restore_retry_topic(msgs: list[StoredMessage], group_retry_topic: str) -> list[StoredMessage]:
    """Messages pulled from ``%RETRY%<group>`` carry their original topic in RETRY_TOPIC:
    the listener sees that topic, as RocketMQ's resetRetryAndNamespace does."""
    out = []
    for msg in msgs:
        original = msg.properties.get(Prop.RETRY_TOPIC)
        out.append(msg._replace(topic=original) if original and msg.topic == group_retry_topic else msg)
    return out


@dataclass(slots=True)
class ConsumeCounters:
    """Totals since start; running info turns them into rates."""

    pulled: int = 0
    pull_rt_ms_total: float = 0.0
    pulls: int = 0
    consumed_ok: int = 0
    consumed_failed: int = 0
    consume_rt_ms_total: float = 0.0
    batches: int = 0
    started_at: float = field(default_factory=time.monotonic)

    def status(self) -> ConsumeStatusInfo:
        elapsed = max(time.monotonic() - self.started_at, 1e-3)
        return ConsumeStatusInfo(
            pull_rt=self.pull_rt_ms_total / self.pulls if self.pulls else 0.0,
            pull_tps=self.pulled / elapsed,
            consume_rt=self.consume_rt_ms_total / self.batches if self.batches else 0.0,
            consume_ok_tps=self.consumed_ok / elapsed,
            consume_failed_tps=self.consumed_failed / elapsed,
            consume_failed_msgs=self.consumed_failed,
        )


class ConsumerCore:
    """A consumer's shared state: group, settings, instance, offset store, subscriptions."""

    def __init__(self, group: str, settings: ConsumerSettings, instance: ClientInstance,
                 offset_store: OffsetStore, consume_type: ConsumeType, clock: Clock = SYSTEM_CLOCK) -> None:
        self.group = group
        self.settings = settings
        self.instance = instance
        self.offset_store = offset_store
        self.consume_type = consume_type
        self.clock = clock
        self.subscriptions: dict[str, Subscription] = {}
        self.counters = ConsumeCounters()
        self.retry_topic = retry_topic(group)
        self._joined = False

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group, consume_type=self.consume_type, message_model=self.settings.message_model,
            consume_from_where=self.settings.consume_from_where,
            subscription_data_set=tuple(s.to_data() for _, s in sorted(self.subscriptions.items())),
        )

    def subscribe(self, topic: str, expression: str | MessageSelector | None) -> Subscription:
        sub = Subscription.of(topic, expression, self.clock)
        self.subscriptions[topic] = sub
        return sub

    def subscribe_retry_topic(self) -> None:
        """Clustering consumers also read their group's retry topic (RocketMQ's copySubscription)."""
        if self.settings.clustering:
            self.subscriptions[self.retry_topic] = Subscription.of(self.retry_topic, SUB_ALL, self.clock)

    async def join(self, consumer: ConsumerImpl) -> None:
        """Load offsets, register ``consumer`` with the client instance, fetch the subscribed
        topics' routes and heartbeat every broker, so the group counts this member."""
        await self.offset_store.load()
        self.instance.register_consumer(self.group, consumer)
        self._joined = True
        await self.instance.start()
        for topic in sorted(self.subscriptions):
            try:
                await self.instance.routes.update(topic)
            except NameServerUnavailableError:
                raise  # none of the NameServers answered: a start that only logs would hide it (docs/client.md)
            except Exception as exc:  # noqa: BLE001 - the periodic refresh tries again
                log.warning("consumer %s: fetching the route of %s failed: %s", self.group, topic, exc)
        await self.instance.heartbeat_all_brokers()
        await self.check_in_brokers()

    async def check_in_brokers(self) -> None:
        """CHECK_CLIENT_CONFIG for every SQL92 subscription at each master of its topic, as
        RocketMQ's consumer does at start: a broker that will not filter by it (no
        ``enablePropertyFilter``, or an expression it cannot parse) fails the start with
        its reason, instead of pulls that fail in the background."""
        routes = self.instance.routes
        for sub in self.subscriptions.values():
            route = routes.cached_route(sub.topic)
            if sub.selector.expression_type is ExpressionType.TAG or route is None:
                continue
            body = CheckClientRequestBody(self.client_id, self.group, sub.to_data())
            for addr in sorted({b.master_addr for b in route.broker_datas if b.master_addr}):
                await self.instance.api.check_client_config(addr, body)

    async def leave(self) -> None:
        """Unregister from every broker; the instance closes with its last user. A consumer
        that never joined (its group already ran in this instance) leaves nothing."""
        if self._joined:
            self._joined = False
            await self.instance.unregister_consumer(self.group)
            await self.instance.shutdown()

    async def send_back(self, msg: StoredMessage, mq: MessageQueue, delay_level: int) -> None:
        """CONSUMER_SEND_MSG_BACK to the master of the broker ``msg`` was pulled from: the
        broker re-stores it in the retry topic (or the DLQ past ``max_reconsume_times``)."""
        addr = self.instance.routes.require_master(mq.broker_name)
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=self.group, delay_level=delay_level,
            origin_msg_id=msg.msg_id, origin_topic=msg.topic,
            max_reconsume_times=self.settings.max_reconsume(orderly=False),
        )
        await self.instance.api.consumer_send_msg_back(addr, header)
