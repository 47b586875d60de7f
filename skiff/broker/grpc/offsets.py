"""The pull-style RPCs of the gRPC service (no official client calls them): QueryOffset,
GetOffset, UpdateOffset and PullMessage, each on one queue of this broker.

QueryOffset answers the queue's first offset (BEGINNING), its end (END) or the first
offset stored at or after a time (TIMESTAMP); GetOffset and UpdateOffset read and
commit the group's consumer offset (the table remoting consumers use); PullMessage
streams the messages from an offset (tag and SQL92 filters as a pull), then the next
offset to pull from. A queue of another broker, an unknown topic or a queue id out of
range is answered with the matching status.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.convert import to_message
from skiff.broker.grpc.producing import status
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.processors.pull import Refusal, compile_subscription, properties_filter
from skiff.broker.topics import TopicConfigManager
from skiff.common.limits import POP_MAX_MSG_NUMS
from skiff.common.stored_message import decode_records
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.store import MessageStore


class Offsets:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 offsets: ConsumerOffsetManager) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.offsets = offsets

    def _queue(self, mq: pb.MessageQueue) -> pb.Status | None:
        """Why ``mq`` is not a queue of this broker, or None."""
        if mq.broker.name and mq.broker.name != self.config.broker_name:
            return status(pb.NOT_FOUND, f"broker {mq.broker.name} is not this one ({self.config.broker_name})")
        tc = self.topics.get(mq.topic.name)
        if tc is None:
            return status(pb.TOPIC_NOT_FOUND, f"topic {mq.topic.name} not found")
        if not 0 <= mq.id < tc.read_queue_nums:
            return status(pb.BAD_REQUEST, f"queue {mq.id} of {mq.topic.name}: it has {tc.read_queue_nums}")
        return None

    def query_offset(self, req: rpc.QueryOffsetRequest) -> rpc.QueryOffsetResponse:
        mq = req.message_queue
        refused = self._queue(mq)
        if refused is not None:
            return rpc.QueryOffsetResponse(status=refused)
        if req.query_offset_policy == pb.TIMESTAMP:
            offset = self.store.get_offset_by_time(mq.topic.name, mq.id, req.timestamp.ToMilliseconds())
        elif req.query_offset_policy == pb.END:
            offset = self.store.get_max_offset(mq.topic.name, mq.id)
        else:
            offset = self.store.get_min_offset(mq.topic.name, mq.id)
        return rpc.QueryOffsetResponse(status=status(pb.OK, "OK"), offset=offset)

    def get_offset(self, req: rpc.GetOffsetRequest) -> rpc.GetOffsetResponse:
        refused = self._queue(req.message_queue)
        if refused is not None:
            return rpc.GetOffsetResponse(status=refused)
        found = self.offsets.query(req.group.name, req.message_queue.topic.name, req.message_queue.id)
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
        mq = req.message_queue
        refused = self._queue(mq)
        expr = req.filter_expression
        flt = compile_subscription(expr.expression or "*", "SQL92" if expr.type == pb.SQL else "TAG",
                                   self.config.enable_property_filter) if refused is None else None
        if isinstance(flt, Refusal):
            refused = status(pb.ILLEGAL_FILTER_EXPRESSION, flt.remark)
        if refused is not None or flt is None:
            yield rpc.PullMessageResponse(status=refused)
            return
        result = self.store.get_messages(mq.topic.name, mq.id, max(0, req.offset),
                                         min(req.batch_size or POP_MAX_MSG_NUMS, POP_MAX_MSG_NUMS),
                                         tag_codes=flt.tag_codes,
                                         record_filter=properties_filter(flt) if flt.needs_properties else None)
        messages = decode_records(b"".join(result.buffers)) if result.found else []
        code = pb.OK if messages else pb.MESSAGE_NOT_FOUND
        yield rpc.PullMessageResponse(status=status(code, "OK" if messages else "no new message"))
        for m in messages:
            yield rpc.PullMessageResponse(message=to_message(m))
        yield rpc.PullMessageResponse(next_offset=result.next_begin_offset)
