"""Bodies of the broker's admin answers: topic stats, runtime info, subscription groups.

GET_TOPIC_STATS_INFO (202) answers `TopicStatsTable`; GET_BROKER_RUNTIME_INFO
(28) answers a `KVTable`; UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) carries a
`SubscriptionGroupConfig`; GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) answers a
`SubscriptionGroupWrapper`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody


@dataclass(frozen=True, slots=True)
class TopicOffset(JsonBody):
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TopicStatsTable(JsonBody):
    offset_table: Mapping[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KVTable(JsonBody):
    """String pairs (the broker's runtime info, the NameServer's KV config)."""

    table: Mapping[str, str] = field(default_factory=dict)


class RetryPolicyType(str, enum.Enum):
    CUSTOMIZED = "CUSTOMIZED"
    EXPONENTIAL = "EXPONENTIAL"


@dataclass(frozen=True, slots=True)
class ExponentialRetryPolicy(JsonBody):
    """Retry after ``initial`` ms, each next delay ``multiplier`` times longer, at most ``max`` ms."""

    initial: int = 5_000
    max: int = 7_200_000
    multiplier: int = 2


@dataclass(frozen=True, slots=True)
class CustomizedRetryPolicy(JsonBody):
    """The delay before each retry, in ms (the last one repeats)."""

    next: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupRetryPolicy(JsonBody):
    """RocketMQ 5's ``groupRetryPolicy``: the backoff 5.x consumers of the group retry with
    (handed to them in their Settings). CUSTOMIZED without a list: the broker's delay levels."""

    type: RetryPolicyType = RetryPolicyType.CUSTOMIZED
    exponential_retry_policy: ExponentialRetryPolicy | None = None
    customized_retry_policy: CustomizedRetryPolicy | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig(JsonBody):
    """A consumer group's settings on a broker, with Java's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False
    """RocketMQ 5's flag: the group consumes in order (POP and gRPC clients get FIFO delivery)."""
    group_retry_policy: GroupRetryPolicy = GroupRetryPolicy()
    attributes: Mapping[str, str] = field(default_factory=dict)
    """RocketMQ 5's group attributes, e.g. 5.5's lite ones (``lite.bind.topic``, ``lite.sub.wildcard``,
    ``lite.sub.client.quota``: skiff.broker.grpc.lite); kept as sent, a leading ``+`` included."""


@dataclass(frozen=True, slots=True)
class DataVersion(JsonBody):
    """When a table last changed: a timestamp and a counter bumped on every change."""

    timestamp: int = 0
    counter: int = 0

    def next(self, now_ms: int) -> DataVersion:
        """The version after one more change at ``now_ms``."""
        return DataVersion(now_ms, self.counter + 1)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper(JsonBody):
    subscription_group_table: Mapping[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()
