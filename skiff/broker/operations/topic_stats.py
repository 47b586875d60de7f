"""A topic's queues at a glance: per write queue its first and end offsets and the store time
of its last message, for remoting's GET_TOPIC_STATS_INFO (`skiff topic stats`, the
dashboard's topic pages, `mqadmin topicStatus`).

The first offset is `OffsetsOperation.min_offset`'s: a tiered queue's first offset in its
tier where that reaches further back than the disk, as consumers from the first offset read.
"""

from __future__ import annotations

from skiff.broker.config import BrokerConfig
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.offsets import OffsetsOperation
from skiff.broker.operations.refusal import Refusal
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.admin import TopicOffset, TopicStatsTable


class TopicStatsOperation:
    def __init__(self, config: BrokerConfig, gate: Gate, offsets: OffsetsOperation) -> None:
        self.config = config
        self.gate = gate
        self.offsets = offsets

    def stats(self, topic: str) -> TopicStatsTable | Refusal:
        tc = self.gate.topic(topic)
        if isinstance(tc, Refusal):
            return tc
        store = self.offsets.store
        table = {}
        for queue_id in range(tc.write_queue_nums):
            high = store.get_max_offset(topic, queue_id)
            last = store.get_store_time(topic, queue_id, high - 1) if high > 0 else None
            table[MessageQueue(topic, self.config.broker_name, queue_id)] = TopicOffset(
                self.offsets.min_offset(topic, queue_id), high, last or 0)
        return TopicStatsTable(table)
