"""Consumer offsets, queue offsets, group members and orderly locks.

QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_CONSUMER_LIST_BY_GROUP
(38), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42),
GET_ALL_CONSUMER_OFFSET (43: the whole table, which slaves copy).

Where a new group starts (RocketMQ's QUERY_CONSUMER_OFFSET rules): a group with no committed
offset for a queue whose first message (offset 0) is still stored gets offset 0,
so it reads a young queue from its start, as Java's broker answers while that
message is in memory. Otherwise QUERY_NOT_FOUND, and the client's
consumeFromWhere decides (CONSUME_FROM_LAST_OFFSET asks GET_MAX_OFFSET). A
stored offset below 0 (UPDATE_CONSUMER_OFFSET stores what it is given, and some
clients persist -1 for "nothing consumed yet") is answered as no offset, as
ConsumerManageProcessor does, so a restarted group does not skip what was sent
while it was down.
"""

from __future__ import annotations

from skiff.broker.clients import ClientManager
from skiff.broker.locks import RebalanceLockManager
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.protocol.bodies.consumer import ConsumerIdList
from skiff.protocol.bodies.lock import LockBatchRequestBody, LockBatchResponseBody
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers import consumer as h
from skiff.store import MessageStore
from skiff.transport.connection import Connection, Handler


class ConsumerProcessor:
    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager, clients: ClientManager,
                 locks: RebalanceLockManager) -> None:
        self.store = store
        self.offsets = offsets
        self.clients = clients
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
        return req.response(body=self.offsets.table().to_json())

    def query_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueryConsumerOffsetRequestHeader.from_ext(req.ext_fields)
        offset = self.offsets.query(q.consumer_group, q.topic, q.queue_id)
        if offset is not None and offset < 0:  # a client's "nothing consumed yet" (-1): no offset, as in Java
            offset = None
        if offset is None and self._first_message_kept(q.topic, q.queue_id):
            offset = 0
        if offset is None:
            return req.response(ResponseCode.QUERY_NOT_FOUND,
                                f"group {q.consumer_group} has no offset for {q.topic} queue {q.queue_id}")
        return req.response(ext_fields={"offset": str(offset)})

    def _first_message_kept(self, topic: str, queue_id: int) -> bool:
        return self.store.get_min_offset(topic, queue_id) == 0

    def update_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        u = h.UpdateConsumerOffsetRequestHeader.from_ext(req.ext_fields)
        self.offsets.commit(u.consumer_group, u.topic, u.queue_id, u.commit_offset)
        return req.response()

    def consumer_list(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetConsumerListByGroupRequestHeader.from_ext(req.ext_fields).consumer_group
        info = self.clients.consumer_group(group)
        if info is None or not info.channels:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no consumer of group {group} is connected")
        return req.response(body=ConsumerIdList(tuple(info.client_ids())).to_json())

    def max_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return _offset(req, self.store.get_max_offset(q.topic, q.queue_id))

    def min_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return _offset(req, self.store.get_min_offset(q.topic, q.queue_id))

    def search_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.SearchOffsetRequestHeader.from_ext(req.ext_fields)
        return _offset(req, self.store.get_offset_by_time(q.topic, q.queue_id, q.timestamp))

    def earliest_store_time(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.QueueRequestHeader.from_ext(req.ext_fields)
        return req.response(ext_fields={"timestamp": str(self.store.get_earliest_store_time(q.topic, q.queue_id))})

    def lock(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        held = self.locks.try_lock(body.consumer_group, body.mq_set, body.client_id)
        return req.response(body=LockBatchResponseBody(tuple(held)).to_json())

    def unlock(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.body)
        self.locks.unlock(body.consumer_group, body.mq_set, body.client_id)
        return req.response()


def _offset(req: RemotingCommand, offset: int) -> RemotingCommand:
    return req.response(ext_fields={"offset": str(offset)})
