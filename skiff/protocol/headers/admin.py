"""Headers of the admin requests a CLI and a dashboard send to a broker.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
DELETE_SUBSCRIPTIONGROUP (207) and
QUERY_CONSUME_TIME_SPAN (303). Resetting offsets (222) and asking a consumer for
its running info (307) share their headers with the broker's calls to
clients, in `skiff.protocol.headers.client_calls`.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class CreateTopicRequestHeader(Header):
    """``topicFilterType`` is SINGLE_TAG or MULTI_TAG; ``perm`` holds PermName bits (2 write, 4 read)."""

    topic: str
    default_topic: str
    read_queue_nums: Int32
    write_queue_nums: Int32
    perm: Int32
    topic_filter_type: str
    topic_sys_flag: Int32 | None = None
    order: bool = False
    attributes: str | None = None
    """RocketMQ 5: attribute changes, ``+cleanup.policy=COMPACTION,-delete.retention.ms``."""


@dataclass(frozen=True, slots=True)
class DeleteTopicRequestHeader(Header):
    topic: str


@dataclass(frozen=True, slots=True)
class GetTopicStatsInfoRequestHeader(Header):
    topic: str


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader(Header):
    """Without ``topic``, the stats cover every topic the group subscribes to."""

    consumer_group: str
    topic: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader(Header):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader(Header):
    producer_group: str


@dataclass(frozen=True, slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str
    remove_offset: bool = False


@dataclass(frozen=True, slots=True)
class QueryConsumeTimeSpanRequestHeader(Header):
    topic: str
    group: str
