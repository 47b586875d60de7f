"""Consumer offsets, queue offsets, group members and orderly locks.

QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_CONSUMER_LIST_BY_GROUP
(38), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42),
GET_ALL_CONSUMER_OFFSET (43: the whole table, which slaves copy).

The remoting door's adapter over the operations: offsets (`OffsetsOperation`, the gRPC
door's too: where a new group starts is decided there, and no offset is QUERY_NOT_FOUND,
after which the client's consumeFromWhere decides, CONSUME_FROM_LAST_OFFSET asking
GET_MAX_OFFSET), a group's members (`ConnectionsOperation`) and locks (`LocksOperation`).
"""

from __future__ import annotations

from skiff.broker.operations import ConnectionsOperation, LockRequest, LocksOperation, OffsetsOperation, QueueEdge, Refusal
from skiff.broker.processors.answers import answer
from skiff.protocol.bodies.consumer import ConsumerIdList
from skiff.protocol.bodies.lock import LockBatchRequestBody, LockBatchResponseBody
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers import consumer as h
from skiff.transport.connection import Connection, Handler


class ConsumerProcessor:
    def __init__(self, operation: OffsetsOperation, connections: ConnectionsOperation, locks: LocksOperation) -> None:
        self.operation = operation
        self.connections = connections
        self.locks = locks

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_store_time,
            RequestCode.LOCK_BATCH_MQ: self.lock,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_offsets,
        }

    def all_offsets(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.operation.table().to_json())

    def query_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueryConsumerOffsetRequestHeader.from_ext(req.ext_fields)
        offset = self.operation.consumed(q.consumer_group, q.topic, q.queue_id)
        if offset is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND,
                                f"group {q.consumer_group} has no offset for {q.topic} queue {q.queue_id}")
        return req.response(ext_fields={"offset": str(offset)})

    def update_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        u = h.UpdateConsumerOffsetRequestHeader.from_ext(req.ext_fields)
        self.operation.commit(u.consumer_group, u.topic, u.queue_id, u.commit_offset)
        return req.response()

    def consumer_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetConsumerListByGroupRequestHeader.from_ext(req.ext_fields).consumer_group
        ids = self.connections.consumer_ids(group)
        return answer(req, ids if isinstance(ids, Refusal) else ConsumerIdList(tuple(ids)))

    def max_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return _offset(req, self.operation.queue_offset(q.topic, q.queue_id, QueueEdge.END))

    def min_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return _offset(req, self.operation.queue_offset(q.topic, q.queue_id, QueueEdge.FIRST))

    async def search_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.SearchOffsetRequestHeader.from_ext(req.ext_fields)
        offset, _ = await self.operation.offset_at_time(q.topic, q.queue_id, q.timestamp)  # may look in the tier
        return _offset(req, offset)

    def earliest_store_time(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return req.response(ext_fields={"timestamp": str(self.operation.earliest_store_time(q.topic, q.queue_id))})

    def lock(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        held = self.locks.lock(LockRequest(body.consumer_group, body.client_id, body.mq_set))
        return req.response(body=LockBatchResponseBody(tuple(held)).to_json())

    def unlock(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        self.locks.unlock(LockRequest(body.consumer_group, body.client_id, body.mq_set))
        return req.response()


def _offset(req: RemotingCommand, offset: int) -> RemotingCommand:
    return req.response(ext_fields={"offset": str(offset)})
