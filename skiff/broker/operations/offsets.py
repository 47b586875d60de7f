"""Offsets: a group's consumed offset (query, commit), a queue's own offsets (first, end,
first at or after a time) and its first message's store time, and the whole table of groups'
offsets, for remoting's QUERY/UPDATE_CONSUMER_OFFSET, GET_MIN/MAX_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME, GET_ALL_CONSUMER_OFFSET (which slaves
copy) and gRPC's GetOffset, UpdateOffset, QueryOffset. A reset of a group's offsets is
`offset_reset`'s.

Where a group starts (RocketMQ's ConsumerManageProcessor rules, the same for both doors):
a stored offset below 0 (some clients persist -1 for "nothing consumed yet") is no
offset; a group with no offset for a queue whose first message (offset 0) is still
stored starts at 0, so it reads a young queue from its start; otherwise there is none
and the client's consumeFromWhere decides.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

from skiff.broker.offsets import ConsumerOffsetManager, ConsumerOffsetTable
from skiff.store import MessageStore


class QueueEdge(enum.Enum):
    """Which of a queue's own offsets is asked for."""

    FIRST = "first"
    END = "end"
    AT_TIME = "at time"


class OffsetsOperation:
    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager) -> None:
        self.store = store
        self.offsets = offsets
        self.tier_first: Callable[[str, int], int | None] | None = None
        """Set when the broker has a tier: a tiered queue's first offset in it, which is the
        queue's first offset when the tier reaches back further than the disk (docs/tiered-storage.md)."""
        self.tier_at_time: Callable[[str, int, int, int], Awaitable[tuple[int, int] | None]] | None = None
        """Set when the broker has a tier: (topic, queue, time, the disk's answer) to the first
        tiered offset stored at or after the time and its store time, when the disk answered its
        first offset and the tier reaches further back (None: the disk's answer stands)."""

    def min_offset(self, topic: str, queue_id: int) -> int:
        """The queue's first readable offset: locally, or in the tier."""
        low = self.store.get_min_offset(topic, queue_id)
        first = None if self.tier_first is None else self.tier_first(topic, queue_id)
        return low if first is None else min(first, low)

    def consumed(self, group: str, topic: str, queue_id: int) -> int | None:
        """Where ``group`` goes on in the queue, or None (the client then decides)."""
        offset = self.offsets.query(group, topic, queue_id)
        if offset is not None and offset < 0:
            offset = None
        if offset is None and self.min_offset(topic, queue_id) == 0:
            offset = 0
        return offset

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit(group, topic, queue_id, offset)

    def queue_offset(self, topic: str, queue_id: int, edge: QueueEdge) -> int:
        """The queue's first or end offset (the offset at a time is `offset_at_time`'s)."""
        if edge is QueueEdge.AT_TIME:
            raise ValueError("the offset at a time is offset_at_time's: it may look in the tier")
        if edge is QueueEdge.END:
            return self.store.get_max_offset(topic, queue_id)
        return self.min_offset(topic, queue_id)

    async def offset_at_time(self, topic: str, queue_id: int, timestamp_ms: int) -> tuple[int, int | None]:
        """The queue's first offset stored at or after ``timestamp_ms`` (its end when none is) and
        that message's store time (None at the end): from the disk, or from the tier for a time
        before the disk's first message. The one answer of remoting's SEARCH_OFFSET_BY_TIMESTAMP,
        gRPC QueryOffset, Kafka ListOffsets and a reset of a group's offsets by time."""
        local = self.store.get_offset_by_time(topic, queue_id, timestamp_ms)
        if self.tier_at_time is not None:
            found = await self.tier_at_time(topic, queue_id, timestamp_ms, local)
            if found is not None:
                return found
        return local, self.store.get_store_time(topic, queue_id, local)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        """The store time of the queue's first message on this broker's disk, -1 when it has none."""
        return self.store.get_earliest_store_time(topic, queue_id)

    def table(self) -> ConsumerOffsetTable:
        """Every group's committed offsets."""
        return self.offsets.table()
