"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): finding stored messages.

VIEW_MESSAGE_BY_ID takes the CommitLog offset (the tail of an offsetMsgId) and
answers the stored record. QUERY_MESSAGE looks a key up in the index within a
time range; the index holds both KEYS and UNIQ_KEY (the id clients show), so a
``_UNIQUE_KEY_QUERY`` needs nothing else. Both answer stored-format records, as
pulls do.
"""

from __future__ import annotations

from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from skiff.store import MessageStore
from skiff.transport.connection import Connection, Handler


class QueryProcessor:
    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.VIEW_MESSAGE_BY_ID: self.view,
            RequestCode.QUERY_MESSAGE: self.query,
        }

    def view(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        offset = ViewMessageRequestHeader.from_ext(req.ext_fields).offset
        record = self.store.read_record(offset)
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset {offset}")
        return req.response(body=record)

    def query(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = QueryMessageRequestHeader.from_ext(req.ext_fields)
        records = self.store.query_by_key(q.topic, q.key, q.max_num, q.begin_timestamp, q.end_timestamp)
        ext = {"indexLastUpdateTimestamp": str(self.store.clock.now_ms()),
               "indexLastUpdatePhyoffset": str(self.store.dispatched_offset)}
        if not records:
            return req.response(ResponseCode.QUERY_NOT_FOUND,
                                f"no message of topic {q.topic} has the key {q.key!r} in that time range", ext)
        return req.response(ext_fields=ext, body_parts=records)
