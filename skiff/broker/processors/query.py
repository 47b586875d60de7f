"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): the remoting door's adapter over
`MessagesOperation` (finding stored messages).

VIEW_MESSAGE_BY_ID takes the CommitLog offset (the tail of an offsetMsgId) and answers the
stored record. QUERY_MESSAGE looks a key (or, with ``_UNIQUE_KEY_QUERY``, a unique id: the
index holds both) up within a time range and answers the records back to back, with how far
the index reached in ``indexLastUpdateTimestamp`` / ``indexLastUpdatePhyoffset``, found or
not (QUERY_NOT_FOUND).
"""

from __future__ import annotations

from skiff.broker.operations import KeyQuery, MessagesOperation, Refusal
from skiff.broker.operations.messages import not_found
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from skiff.transport.connection import Connection, Handler


class QueryProcessor:
    def __init__(self, messages: MessagesOperation) -> None:
        self.messages = messages

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.VIEW_MESSAGE_BY_ID: self.view,
            RequestCode.QUERY_MESSAGE: self.query,
        }

    def view(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        record = self.messages.view(ViewMessageRequestHeader.from_ext(req.ext_fields).offset)
        if isinstance(record, Refusal):
            return req.response(record.code, record.reason)
        return req.response(body=record)

    def query(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = QueryMessageRequestHeader.from_ext(req.ext_fields)
        query = KeyQuery(q.topic, q.key, q.max_num, q.begin_timestamp, q.end_timestamp)
        matches = self.messages.by_key(query)
        ext = {"indexLastUpdateTimestamp": str(matches.index_updated_ms),
               "indexLastUpdatePhyoffset": str(matches.index_offset)}
        if not matches.records:
            refusal = not_found(query)
            return req.response(refusal.code, refusal.reason, ext)
        return req.response(ext_fields=ext, body_parts=matches.records)
