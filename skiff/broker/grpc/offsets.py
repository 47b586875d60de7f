"""The pull-style RPCs of the gRPC service (no official client calls them): QueryOffset,
GetOffset, UpdateOffset and PullMessage, each on one queue of this broker.

QueryOffset answers the queue's first offset (BEGINNING), its end (END) or the first
offset stored at or after a time (TIMESTAMP); GetOffset and UpdateOffset read and
commit the group's consumer offset (the table remoting consumers use); PullMessage
streams the messages from an offset (tag and SQL92 filters as a pull), then the next
offset to pull from, after the same gate as a remoting pull (`skiff.broker.operations`:
the group and its consumeEnable, the broker's and the topic's read permission, the
queue range). A queue of another broker, an unknown topic or a queue id out of range
is answered with the matching status.

A PullMessage of an offset only the tier holds, whose row group the tier is still fetching or
rebuilding (the read answers MESSAGE_WAS_REMOVING, "retry at once"), is held as the remoting door
holds such a pull (skiff.broker.processors.pull): read again each time the tier's work on its
queue ends (`TierReads.ready_listeners` → `QueueWaiters.wake`), for `TIER_PULL_HOLD_MAX_MS` at
most, then answered with what the last read found ("no message, next offset = the same offset"
if still nothing). Answered at once, its caller pulled again at once, tens of times a first read.
The broker's stop (`close`) ends every hold at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.convert import to_message
from skiff.broker.grpc.status import refused, status
from skiff.broker.operations import Gate, PullOperation, PullRequest, Pulled, Refusal
from skiff.broker.operations.offsets import OffsetsOperation, QueueEdge
from skiff.broker.queue_waiters import QueueWaiters
from skiff.common.limits import POP_MAX_MSG_NUMS, TIER_PULL_HOLD_MAX_MS
from skiff.common.stored_message import decode_records
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.store import GetStatus

_EDGES = {pb.BEGINNING: QueueEdge.FIRST, pb.END: QueueEdge.END, pb.TIMESTAMP: QueueEdge.AT_TIME}


class Offsets:
    def __init__(self, config: BrokerConfig, gate: Gate, offsets: OffsetsOperation, puller: PullOperation,
                 tier_waiters: QueueWaiters) -> None:
        self.config = config
        self.gate = gate
        self.offsets = offsets
        self.puller = puller
        self.tier_waiters = tier_waiters
        """Pulls held while the tier fetches for them, woken by its ready listeners (wired where the
        broker has a tier; without one no pull waits: `PullOperation.tier_waiting` is never true)."""

    def close(self) -> None:
        """The broker stops: every held pull reads once more and is answered now, none is held after."""
        self.tier_waiters.close()

    def _other_broker(self, mq: pb.MessageQueue) -> pb.Status | None:
        if mq.broker.name and mq.broker.name != self.config.broker_name:
            return status(pb.NOT_FOUND, f"broker {mq.broker.name} is not this one ({self.config.broker_name})")
        return None

    def _queue(self, mq: pb.MessageQueue) -> pb.Status | None:
        """Why ``mq`` is not a queue of this broker, or None."""
        other = self._other_broker(mq)
        if other is not None:
            return other
        found = self.gate.readable_queue(mq.topic.name, mq.id)
        return refused(found) if isinstance(found, Refusal) else None
    async def query_offset(self, req: rpc.QueryOffsetRequest) -> rpc.QueryOffsetResponse:
        mq = req.message_queue
        refused = self._queue(mq)
        if refused is not None:
            return rpc.QueryOffsetResponse(status=refused)
        edge = _EDGES.get(req.query_offset_policy, QueueEdge.FIRST)
        if edge is QueueEdge.AT_TIME:  # may look in the tier (docs/tiered-storage.md)
            offset, _ = await self.offsets.offset_at_time(mq.topic.name, mq.id, req.timestamp.ToMilliseconds())
        else:
            offset = self.offsets.queue_offset(mq.topic.name, mq.id, edge)
        return rpc.QueryOffsetResponse(status=status(pb.OK, "OK"), offset=offset)

    def get_offset(self, req: rpc.GetOffsetRequest) -> rpc.GetOffsetResponse:
        refused = self._queue(req.message_queue)
        if refused is not None:
            return rpc.GetOffsetResponse(status=refused)
        found = self.offsets.consumed(req.group.name, req.message_queue.topic.name, req.message_queue.id)
        if found is None:
            return rpc.GetOffsetResponse(status=status(pb.OFFSET_NOT_FOUND, "the group committed no offset here"))
        return rpc.GetOffsetResponse(status=status(pb.OK, "OK"), offset=found)

    def update_offset(self, req: rpc.UpdateOffsetRequest) -> rpc.UpdateOffsetResponse:
        refused = self._queue(req.message_queue) or (status(pb.ILLEGAL_CONSUMER_GROUP, "no consumer group")
                                                     if not req.group.name else None)
        if refused is not None:
            return rpc.UpdateOffsetResponse(status=refused)
        if req.offset < 0:
            return rpc.UpdateOffsetResponse(status=status(pb.ILLEGAL_OFFSET, f"offset {req.offset} is negative"))
        self.offsets.commit(req.group.name, req.message_queue.topic.name, req.message_queue.id, req.offset)
        return rpc.UpdateOffsetResponse(status=status(pb.OK, "OK"))

    async def pull(self, req: rpc.PullMessageRequest) -> AsyncIterator[rpc.PullMessageResponse]:
        """The gate's checks and one read, as a remoting pull (no long polling: the RPC has none),
        held while the tier fetches what it asked for (`_hold_for_tier`)."""
        mq, expr = req.message_queue, req.filter_expression
        wrong_broker = self._other_broker(mq)
        if wrong_broker is not None:
            yield rpc.PullMessageResponse(status=wrong_broker)
            return
        request = PullRequest(
            group=req.group.name, topic=mq.topic.name, queue_id=mq.id, offset=max(0, req.offset),
            max_count=min(req.batch_size or POP_MAX_MSG_NUMS, POP_MAX_MSG_NUMS), expression=expr.expression or "*",
            expression_type="SQL92" if expr.type == pb.SQL else "TAG")
        pulled = self.puller.pull(request)
        if isinstance(pulled, Refusal):
            yield rpc.PullMessageResponse(status=refused(pulled))
            return
        if pulled.result.status is GetStatus.MESSAGE_WAS_REMOVING:
            pulled = await self._hold_for_tier(request, pulled)
        result = pulled.result
        messages = decode_records(b"".join(result.buffers)) if result.found else []
        code = pb.OK if messages else pb.MESSAGE_NOT_FOUND
        yield rpc.PullMessageResponse(status=status(code, "OK" if messages else "no new message"))
        for m in messages:
            yield rpc.PullMessageResponse(message=to_message(m))
        yield rpc.PullMessageResponse(next_offset=result.next_begin_offset)

    async def _hold_for_tier(self, request: PullRequest, pulled: Pulled) -> Pulled:
        """``pulled`` read again each time the tier's work on its queue ends, while the tier answers
        it "retry" and is still working for it, until `TIER_PULL_HOLD_MAX_MS` passed (read once
        more then) or the broker stops: the last read. Waits on the loop, never blocking it."""
        key = [(request.topic, request.queue_id)]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIER_PULL_HOLD_MAX_MS / 1000.0
        event = asyncio.Event()
        self.tier_waiters.register(key, event)  # a wake is run on this loop: none came since the read
        try:
            while pulled.result.status is GetStatus.MESSAGE_WAS_REMOVING and not self.tier_waiters.closed \
                    and loop.time() < deadline:
                if not self.puller.tier_waiting(request.topic, request.queue_id):
                    pulled = self.puller.read(request, pulled.filter)  # its work may have ended since the read
                    break
                try:
                    await asyncio.wait_for(event.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    pass
                event.clear()
                pulled = self.puller.read(request, pulled.filter)
        finally:
            self.tier_waiters.unregister(key, event)
        return pulled
