"""Admin requests about topics and the broker itself.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG
(21), GET_TOPIC_STATS_INFO (202), GET_BROKER_RUNTIME_INFO (28) and
GET_BROKER_CONFIG (26). Topic changes are persisted and registered with the
NameServers at once (the topic manager's ``on_change``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from skiff.broker.config import BrokerConfig, config_properties
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import TopicConfigManager
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.common.message import MessageQueue
from skiff.common.names import SYSTEM_TOPICS, topic_error
from skiff.protocol.bodies.admin import KVTable, TopicOffset, TopicStatsTable
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.topic import TopicConfig, TopicFilterType
from skiff.protocol.bodies.topic_attributes import apply_attribute_changes, parse_attribute_changes
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from skiff.store import MessageStore, StoreConfig
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)

REGISTER_WAIT_S = 2.0
"""Longest a topic change's answer waits for its registration (then it answers anyway;
the registration goes on, and the periodic one retries a NameServer that is down). Below
the 3 s an admin client waits for an answer by default, so a slow registration on a busy
host answers late, not never (a wait of 3 s met the client's timeout exactly)."""


class TopicAdminProcessor:
    def __init__(self, config: BrokerConfig, store_config: StoreConfig, store: MessageStore,
                 topics: TopicConfigManager, offsets: ConsumerOffsetManager, stats: BrokerStats,
                 registered: Callable[[float], Awaitable[None]]) -> None:
        self.config = config
        self.registered = registered
        """Waits (at most the seconds given) until topic changes reach the NameServers."""
        self.store_config = store_config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.stats = stats

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
        }

    async def create_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext(req.ext_fields)
        why = _topic_refusal(h.topic, self.config) or _create_refusal(h)
        if why is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, why)
        try:
            changes = parse_attribute_changes(h.attributes or "")
        except BodyError as exc:
            return req.response(ResponseCode.SYSTEM_ERROR, f"topic {h.topic}: {exc}")
        old = self.topics.get(h.topic)
        attributes = apply_attribute_changes(old.attributes if old else {}, changes)
        self.topics.put(TopicConfig(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm,
                                    TopicFilterType(h.topic_filter_type), h.topic_sys_flag or 0, h.order,
                                    attributes))
        await self._prepare_queues(h.topic, max(h.read_queue_nums, h.write_queue_nums))
        await self.registered(REGISTER_WAIT_S)
        return req.response()

    async def _prepare_queues(self, topic: str, queue_nums: int) -> None:
        """The queues' directories, made off the loop; a failure (a full disk) only leaves
        each queue to make its own on its first message, as before."""
        try:
            await asyncio.to_thread(self.store.prepare_topic, topic, queue_nums)
        except OSError as exc:
            log.warning("cannot make the queue directories of topic %s now: %s", topic, exc)

    async def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = DeleteTopicRequestHeader.from_ext(req.ext_fields).topic
        why = _topic_refusal(topic, self.config)
        if why is not None:
            return req.response(ResponseCode.SYSTEM_ERROR, why)
        self.topics.delete(topic)
        self.offsets.remove_topic(topic)
        self.store.delete_topic(topic)
        await self.registered(REGISTER_WAIT_S)
        return req.response()

    def all_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.topics.wrapper().to_json())

    def topic_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = GetTopicStatsInfoRequestHeader.from_ext(req.ext_fields).topic
        tc = self.topics.get(topic)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        table = {}
        for queue_id in range(tc.write_queue_nums):
            high = self.store.get_max_offset(topic, queue_id)
            last = self.store.get_store_time(topic, queue_id, high - 1) if high > 0 else None
            table[MessageQueue(topic, self.config.broker_name, queue_id)] = TopicOffset(
                self.store.get_min_offset(topic, queue_id), high, last or 0)
        return req.response(body=TopicStatsTable(table).to_json())

    def runtime_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=KVTable(self.stats.runtime_table()).to_json())

    def broker_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        props = config_properties(self.config, self.store_config)
        text = "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
        return req.response(ext_fields={"version": self.topics.data_version.to_json().decode()}, body=text.encode())


def _topic_refusal(topic: str, config: BrokerConfig) -> str | None:
    why = topic_error(topic)
    if why is not None:
        return why
    if topic in SYSTEM_TOPICS or topic in (config.broker_cluster_name, config.broker_name):
        return f"the topic {topic} is a system topic and cannot be changed"
    return None


def _create_refusal(h: CreateTopicRequestHeader) -> str | None:
    for name, nums in (("readQueueNums", h.read_queue_nums), ("writeQueueNums", h.write_queue_nums)):
        if not 0 <= nums <= QUEUES_PER_TOPIC_MAX:
            return f"{name}={nums} is out of range (0 to {QUEUES_PER_TOPIC_MAX})"
    if not 0 <= h.perm <= 15:
        return f"perm={h.perm} is not perm bits (2 write, 4 read)"
    if h.topic_filter_type not in TopicFilterType.__members__:
        return f"topicFilterType={h.topic_filter_type!r} is not SINGLE_TAG or MULTI_TAG"
    return None
