"""A Kafka group's committed offsets, kept where RocketMQ keeps each queue's: in the
consumer offset table of the broker group that holds the queue.

A group's coordinator receives every commit of the group (OffsetCommit names partitions
of every broker group). A partition of this broker group is committed to this broker's
table (`OffsetsOperation`); another group's partition is sent to that group's master as
RocketMQ's UPDATE_CONSUMER_OFFSET, and read back with QUERY_CONSUMER_OFFSET. So
`skiff consumer progress` and the dashboard, which ask each broker for its own queues,
show a Kafka group's lag on every broker group.

QUERY_CONSUMER_OFFSET answers 0 for a queue that starts at 0 and has no commit (a
RocketMQ consumer starts there); the door reads that 0 as no commit, so the client's
``auto.offset.reset`` decides, as it does for this broker's own partitions. A commit of
offset 0 (nothing consumed) then reads as none too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from skiff.broker.kafka.cluster import Place
from skiff.broker.operations import OffsetsOperation
from skiff.common.errors import SkiffError
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader
from skiff.protocol.kafka.errors import ErrorCode
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

Placer = Callable[[str, int], Awaitable[Place | None]]
Numberer = Callable[[str, int], Awaitable[int | None]]
REMOTE_TIMEOUT_MS = 3_000


async def _here(topic: str, partition: int) -> Place:
    return Place("", partition, True)


async def _same(topic: str, queue_id: int) -> int:
    return queue_id


class PartitionOffsets:
    def __init__(self, offsets: OffsetsOperation, place: Placer = _here, partition_of: Numberer = _same,
                 client: RemotingClient | None = None) -> None:
        """``place``: where a partition is, ``partition_of``: the partition of a queue here
        (the defaults, for one broker group alone: partition = queue id); ``client``: reaches
        other broker groups' masters."""
        self.offsets = offsets
        self.place = place
        self.partition_of = partition_of
        self.client = client

    async def commit(self, group: str, topic: str, partition: int, offset: int) -> ErrorCode:
        where = await self.place(topic, partition)
        if where is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if where.local:
            self.offsets.commit(group, topic, where.queue_id, offset)
            return ErrorCode.NONE
        header = UpdateConsumerOffsetRequestHeader(group, topic, where.queue_id, offset, where.broker_name)
        resp = await self._remote(where.master, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                                        header.to_ext()))
        return ErrorCode.NONE if resp is not None and resp.code == ResponseCode.SUCCESS \
            else ErrorCode.COORDINATOR_NOT_AVAILABLE

    async def committed(self, group: str, topic: str, partition: int) -> tuple[int, ErrorCode]:
        """The next offset ``group`` reads in ``partition``, -1 without a commit."""
        where = await self.place(topic, partition)
        if where is None:
            return -1, ErrorCode.NONE  # Kafka answers an unknown partition's offset as none too
        if where.local:
            offset = self.offsets.offsets.query(group, topic, where.queue_id)
            return (-1 if offset is None or offset < 0 else offset), ErrorCode.NONE
        header = QueryConsumerOffsetRequestHeader(group, topic, where.queue_id, where.broker_name)
        resp = await self._remote(where.master, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                                                        header.to_ext()))
        if resp is None:
            return -1, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if resp.code != ResponseCode.SUCCESS:
            return -1, ErrorCode.NONE
        offset = int((resp.ext_fields or {}).get("offset", -1))
        return (-1 if offset <= 0 else offset), ErrorCode.NONE

    async def committed_here(self, group: str) -> dict[str, list[int]]:
        """The partitions of this broker group ``group`` has commits for, by topic (OffsetFetch
        of every topic: other groups' commits are not listed)."""
        table = self.offsets.offsets
        out: dict[str, list[int]] = {}
        for topic in table.topics_of(group):
            numbered = [await self.partition_of(topic, q) for q in sorted(table.offsets(group, topic))]
            out[topic] = [p for p in numbered if p is not None]
        return out

    async def _remote(self, addr: str | None, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.client is None or addr is None:
            return None
        try:
            return await self.client.invoke(addr, cmd, REMOTE_TIMEOUT_MS)
        except SkiffError as exc:
            log.warning("broker %s did not answer the Kafka door's %s: %s", addr, RequestCode(cmd.code).name, exc)
            return None
