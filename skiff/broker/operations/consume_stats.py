"""A group's consume progress: per queue the broker's end offset, the group's committed
offset, the store time of the last message it consumed, where it reads next and (a POP
group's) messages in flight, for remoting's GET_CONSUME_STATS (`skiff consumer progress`,
the dashboard's lag).

As RocketMQ's ``getConsumeStats``: the topics are the one named, else every topic the group
committed an offset of or pops; a topic the group's online members do not subscribe is
left out; every read queue is listed; a committed -1 ("nothing consumed") counts as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.clients import ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.broker.pop.service import PopService
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.consumer import ConsumeStats, OffsetWrapper
from skiff.store import MessageStore


@dataclass(frozen=True, slots=True)
class ConsumeStatsRequest:
    group: str
    topic: str = ""
    """Empty: every topic the group consumes here."""


class ConsumeStatsOperation:
    def __init__(self, config: BrokerConfig, store: MessageStore, gate: Gate, offsets: ConsumerOffsetManager,
                 clients: ClientManager, pop: PopService) -> None:
        """``pop``: the POP groups' cursors and in-flight messages, for their topics, pull
        offsets and real lag."""
        self.config = config
        self.store = store
        self.gate = gate
        self.offsets = offsets
        self.clients = clients
        self.pop = pop

    def stats(self, request: ConsumeStatsRequest) -> ConsumeStats | Refusal:
        """The group's progress per queue; a named topic that is not here is TOPIC_NOT_EXIST."""
        if request.topic:
            named = self.gate.topic(request.topic)
            if isinstance(named, Refusal):
                return named
        group = request.group
        info = self.clients.consumer_group(group)
        table: dict[MessageQueue, OffsetWrapper] = {}
        for topic in [request.topic] if request.topic else self._topics_of(group):
            tc = self.gate.topic(topic)
            if isinstance(tc, Refusal) or (info is not None and topic not in info.subscriptions):
                continue
            committed = self.offsets.offsets(group, topic)
            for queue_id in range(tc.read_queue_nums):  # the queues consumers read, as Java's getConsumeStats
                table[MessageQueue(topic, self.config.broker_name, queue_id)] = self._queue_stats(
                    group, topic, queue_id, max(committed.get(queue_id, 0), 0))  # -1 counts as 0, as Java
        return ConsumeStats(table)

    def _topics_of(self, group: str) -> list[str]:
        popped = (t for g, t, _, _ in self.pop.consumed() if g == group)
        return sorted({*self.offsets.topics_of(group), *popped})

    def _queue_stats(self, group: str, topic: str, queue_id: int, consumed: int) -> OffsetWrapper:
        last = self.store.get_store_time(topic, queue_id, consumed - 1) if consumed > 0 else None
        popped = self.pop.progress(group, topic, queue_id)
        pulled, in_flight = popped if popped is not None else (consumed, 0)
        return OffsetWrapper(self.store.get_max_offset(topic, queue_id), consumed, last or 0, max(pulled, consumed),
                             in_flight)
