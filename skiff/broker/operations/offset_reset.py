"""A reset of a group's offsets on a topic, for remoting's INVOKE_BROKER_TO_RESET_OFFSET
(`skiff consumer reset-offset`, the dashboard).

Each write queue's committed offset moves to the first message stored at or after a time
(`LATEST`: the end of the queue), in the broker's table (so a group that is offline
starts there too); without ``force`` an offset only ever moves back. The offset at a time is
`OffsetsOperation.offset_at_time`'s, every search by time's: for a tiered topic a time before
the disk's first message finds its offset in the tier (docs/tiered-storage.md). Every queue's
target is found before any offset moves, so a tier that cannot be read fails the reset whole
(SYSTEM_ERROR naming the tier), not half of it. Every live member of the group is then told
with RESET_CONSUMER_CLIENT_OFFSET (the C++ client reads its own body form), as RocketMQ's
broker does, so it drops what it holds and pulls from there.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.clients import ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.offsets import OffsetsOperation, QueueEdge
from skiff.broker.operations.refusal import Refusal
from skiff.common.message import MessageQueue
from skiff.protocol.bodies.client_calls import ResetOffsetBody
from skiff.protocol.codes import LanguageCode, RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ConnectionClosed
from skiff.protocol.headers.client_calls import ResetOffsetRequestHeader

LATEST = -1
"""A reset timestamp meaning "the end of each queue"."""


@dataclass(frozen=True, slots=True)
class OffsetReset:
    group: str
    topic: str
    timestamp_ms: int
    """The time to reset to, or `LATEST`."""
    force: bool = False
    """Move an offset forward too (else only back)."""


class OffsetResetOperation:
    def __init__(self, config: BrokerConfig, gate: Gate, offsets: OffsetsOperation, clients: ClientManager) -> None:
        self.config = config
        self.gate = gate
        self.offsets = offsets
        self.clients = clients

    async def reset(self, request: OffsetReset) -> ResetOffsetBody | Refusal:
        """The offset each queue of the topic now has for the group (a look in the tier may
        fetch from its bucket, hence async; `TierError` when it cannot be read)."""
        tc = self.gate.topic(request.topic)
        if isinstance(tc, Refusal):
            return tc
        targets = [await self._target(request, queue_id) for queue_id in range(tc.write_queue_nums)]
        table = {}
        for queue_id, target in enumerate(targets):
            table[MessageQueue(request.topic, self.config.broker_name, queue_id)] = \
                self._reset_queue(request, queue_id, target)
        body = ResetOffsetBody(table)
        self._tell_consumers(request, body)
        return body

    async def _target(self, request: OffsetReset, queue_id: int) -> int:
        if request.timestamp_ms == LATEST:
            return self.offsets.queue_offset(request.topic, queue_id, QueueEdge.END)
        return (await self.offsets.offset_at_time(request.topic, queue_id, request.timestamp_ms))[0]

    def _reset_queue(self, request: OffsetReset, queue_id: int, target: int) -> int:
        current = self.offsets.offsets.query(request.group, request.topic, queue_id)
        if request.force or current is None or current < 0 or target < current:  # below 0: no offset
            self.offsets.commit(request.group, request.topic, queue_id, target)
            return target
        return current

    def _tell_consumers(self, request: OffsetReset, body: ResetOffsetBody) -> None:
        info = self.clients.consumer_group(request.group)
        if info is None:
            return
        ext = ResetOffsetRequestHeader(request.topic, request.group, request.timestamp_ms, request.force).to_ext()
        for channel in list(info.channels.values()):
            raw = body.to_json_for_cpp() if channel.language == LanguageCode.CPP.name else body.to_json()
            try:
                channel.conn.send_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, raw))
            except ConnectionClosed:
                pass
