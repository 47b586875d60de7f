"""END_TRANSACTION (37): a producer commits, rolls back or leaves open the transaction of a
half message (docs/transactions.md).

Clients send it oneway (Java with the oneway flag, the C++ client with flag 0, so
it looks like a request that wants an answer): the answer below is written unless
the oneway flag is set, and is what a test or a two-way caller sees. The checks
(producer group, tranStateTableOffset, commitLogOffset) and the outcome are
`skiff.broker.transactions.TransactionService`'s; refusals name what was wrong.

| outcome | code |
|---|---|
| committed, rolled back, left open (commitOrRollback 0), the same decision again | SUCCESS (a remark says when nothing was done) |
| already closed the other way, or long ago | TRANSACTION_FAILED |
| no half message there, wrong group or offset, bad commitOrRollback | SYSTEM_ERROR (RocketMQ's code for these) |
| the committed message cannot be made | MESSAGE_ILLEGAL |
| the store refused the committed message | the send path's code for that store status |

Under SYNC_FLUSH a commit is answered after the fsync that covers the message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from skiff.broker.operations.transaction import EndTransactionOperation
from skiff.broker.processors.send import STATUS_CODES
from skiff.broker.transactions import EndResult, EndStatus
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)

CODES = {
    EndStatus.COMMITTED: ResponseCode.SUCCESS,
    EndStatus.ROLLED_BACK: ResponseCode.SUCCESS,
    EndStatus.LEFT_OPEN: ResponseCode.SUCCESS,
    EndStatus.ALREADY_DONE: ResponseCode.SUCCESS,
    EndStatus.ALREADY_CLOSED: ResponseCode.TRANSACTION_FAILED,
    EndStatus.NOT_FOUND: ResponseCode.SYSTEM_ERROR,
    EndStatus.WRONG_GROUP: ResponseCode.SYSTEM_ERROR,
    EndStatus.WRONG_OFFSET: ResponseCode.SYSTEM_ERROR,
    EndStatus.BAD_DECISION: ResponseCode.SYSTEM_ERROR,
    EndStatus.COMMIT_REFUSED: ResponseCode.MESSAGE_ILLEGAL,
}
"""Every status but PUT_FAILED, whose code is the store status's (`STATUS_CODES`)."""


class EndTransactionProcessor:
    def __init__(self, operation: EndTransactionOperation) -> None:
        self.operation = operation

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = EndTransactionRequestHeader.from_ext(req.ext_fields)
        result = self.operation.end(h)
        if isinstance(result, EndResult):
            return self._answer(conn, req, h, result)
        return self._answer_later(conn, req, h, result)

    async def _answer_later(self, conn: Connection, req: RemotingCommand, h: EndTransactionRequestHeader,
                            result: Awaitable[EndResult]) -> RemotingCommand:
        return self._answer(conn, req, h, await result)

    def _answer(self, conn: Connection, req: RemotingCommand, h: EndTransactionRequestHeader,
                result: EndResult) -> RemotingCommand:
        code, remark = outcome_code(result)
        if code != ResponseCode.SUCCESS:
            log.warning("END_TRANSACTION from %s (group %s, msgId %s, check %s) refused: %s", conn.peer_addr,
                        h.producer_group, h.msg_id, h.from_transaction_check, remark)
        return req.response(code, remark or None)


def outcome_code(result: EndResult) -> tuple[int, str]:
    """The 4.x response code of an end of transaction, and its remark."""
    if result.status is EndStatus.PUT_FAILED and result.put is not None:
        return STATUS_CODES[result.put.status], result.remark
    return CODES[result.status], result.remark
