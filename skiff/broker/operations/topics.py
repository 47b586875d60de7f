"""Topics: create or update one (queue counts, permission, attributes) and delete one, for
remoting's UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC_IN_BROKER and Kafka's CreateTopics,
CreatePartitions, AlterConfigs and DeleteTopics; read one (Kafka's DescribeConfigs, and
the current settings a Kafka change starts from) or the whole table (GET_ALL_TOPIC_CONFIG).

A change is persisted and registered with the NameServers at once (the topic manager's
``on_change``); the answer waits up to `REGISTER_WAIT_S` for the registration, so a client
that asks a NameServer for the route right after the answer finds it. A new topic's queue
directories are made off the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from skiff.broker.config import BrokerConfig
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.broker.topics import TopicConfigManager
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.common.names import SYSTEM_TOPICS, topic_error
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.topic import Perm, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType
from skiff.protocol.bodies.topic_attributes import apply_attribute_changes, parse_attribute_changes
from skiff.protocol.codes import ResponseCode
from skiff.store import MessageStore

log = logging.getLogger(__name__)

REGISTER_WAIT_S = 2.0
"""Longest a topic change's answer waits for its registration (then it answers anyway;
the registration goes on, and the periodic one retries a NameServer that is down). Below
the 3 s an admin client waits for an answer by default, so a slow registration on a busy
host answers late, not never (a wait of 3 s met the client's timeout exactly)."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """A topic as it should be after the change (an existing one is replaced)."""

    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = int(Perm.READ | Perm.WRITE)
    filter_type: str = TopicFilterType.SINGLE_TAG.value
    sys_flag: int = 0
    order: bool = False
    attribute_changes: str = ""
    """RocketMQ's ``+name=value,-name`` text, applied to the topic's current attributes."""


class TopicsOperation:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager, registered: Callable[[float], Awaitable[None]], gate: Gate) -> None:
        """``registered``: waits (at most the seconds given) until topic changes reach the NameServers;
        ``gate``: a topic read names one that must exist (`Gate.topic`)."""
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.registered = registered
        self.gate = gate

    def get(self, topic: str) -> TopicConfig | Refusal:
        """The topic's settings; TOPIC_NOT_EXIST when it is not here."""
        return self.gate.topic(topic)

    def table(self) -> TopicConfigSerializeWrapper:
        """Every topic here, with the table's data version."""
        return self.topics.wrapper()

    def refusal(self, topic: str) -> Refusal | None:
        """Why ``topic`` may not be changed here (a bad name, a system topic), or None."""
        why = topic_error(topic)
        if why is None and (topic in SYSTEM_TOPICS or topic in (self.config.broker_cluster_name,
                                                                self.config.broker_name)):
            why = f"the topic {topic} is a system topic and cannot be changed"
        return None if why is None else Refusal(ResponseCode.SYSTEM_ERROR, why, bad_request=True)

    async def put(self, change: TopicChange) -> TopicConfig | Refusal:
        """Create or replace the topic; its attributes are the current ones with the changes."""
        refusal = self.refusal(change.topic) or _change_refusal(change)
        if refusal is not None:
            return refusal
        try:
            changes = parse_attribute_changes(change.attribute_changes)
        except BodyError as exc:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"topic {change.topic}: {exc}", bad_request=True)
        old = self.topics.get(change.topic)
        tc = TopicConfig(change.topic, change.read_queue_nums, change.write_queue_nums, change.perm,
                         TopicFilterType(change.filter_type), change.sys_flag, change.order,
                         apply_attribute_changes(old.attributes if old else {}, changes))
        self.topics.put(tc)
        await self._prepare_queues(change.topic, max(change.read_queue_nums, change.write_queue_nums))
        await self.registered(REGISTER_WAIT_S)
        return tc

    async def delete(self, topic: str) -> Refusal | None:
        """The topic, its messages' queues and the groups' offsets of it go."""
        refusal = self.refusal(topic)
        if refusal is not None:
            return refusal
        self.topics.delete(topic)
        self.offsets.remove_topic(topic)
        self.store.delete_topic(topic)
        await self.registered(REGISTER_WAIT_S)
        return None

    async def _prepare_queues(self, topic: str, queue_nums: int) -> None:
        """The queues' directories, made off the loop; a failure (a full disk) only leaves
        each queue to make its own on its first message."""
        try:
            await asyncio.to_thread(self.store.prepare_topic, topic, queue_nums)
        except OSError as exc:
            log.warning("cannot make the queue directories of topic %s now: %s", topic, exc)


def _change_refusal(change: TopicChange) -> Refusal | None:
    why = _change_error(change)
    return None if why is None else Refusal(ResponseCode.SYSTEM_ERROR, why, bad_request=True)


def _change_error(change: TopicChange) -> str | None:
    for name, nums in (("readQueueNums", change.read_queue_nums), ("writeQueueNums", change.write_queue_nums)):
        if not 0 <= nums <= QUEUES_PER_TOPIC_MAX:
            return f"{name}={nums} is out of range (0 to {QUEUES_PER_TOPIC_MAX})"
    if not 0 <= change.perm <= 15:
        return f"perm={change.perm} is not perm bits (2 write, 4 read)"
    if change.filter_type not in TopicFilterType.__members__:
        return f"topicFilterType={change.filter_type!r} is not SINGLE_TAG or MULTI_TAG"
    return None
