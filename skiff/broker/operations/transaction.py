"""End of a transaction: commit, roll back or leave open a half message, for both doors.

The decision is `TransactionService`'s (skiff.broker.transactions); this operation adds
what a sender is promised: under SYNC_FLUSH a commit is settled after the fsync that
covers the committed message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable

from skiff.broker.transactions import EndResult, EndStatus, TransactionService
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.store import PutResult, PutStatus


class EndTransactionOperation:
    def __init__(self, transactions: TransactionService) -> None:
        self.transactions = transactions

    def end(self, request: EndTransactionRequestHeader) -> EndResult | Awaitable[EndResult]:
        result = self.transactions.end_transaction(request)
        put = result.put
        if result.status is EndStatus.COMMITTED and put is not None and put.flushed is not None:
            return _after_flush(result, put, put.flushed)
        return result


async def _after_flush(result: EndResult, put: PutResult,
                       flushed: concurrent.futures.Future[PutStatus]) -> EndResult:
    status = await asyncio.wrap_future(flushed)
    if status is PutStatus.PUT_OK:
        return result
    return EndResult(EndStatus.PUT_FAILED, "the committed message was not flushed within syncFlushTimeout",
                     put._replace(status=status))
