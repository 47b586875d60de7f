"""TransactionTable: the open and recently closed transactions, rebuilt from the half and
op queues, and how far each queue is settled. Pure state: no store, no clock, no I/O.

A transaction is named by its *origin*, the half-queue offset of its first half
message; copies made by checks carry it (``TRAN_PREPARED_QUEUE_OFFSET``) and op
records name it. The table reads both queues in order:

- the half queue up to ``half_scanned``: each record opens its origin, or (a later
  copy) replaces the open entry, or is skipped when its origin is closed;
- the op queue up to ``op_scanned``: each op closes its origin.

Progress, persisted as the consume offsets of ``CID_RMQ_SYS_TRANS``:

- the half offset H = the lowest queue offset of an open transaction's latest copy
  (or ``half_scanned``): every record below H is settled;
- the op offset O = the first op whose transaction still has a record at or above
  H. A closed entry is kept while its last record is at or above H, so any copy a
  restart re-reads from H finds its op again from O.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from skiff.broker.transactions.half import HalfRecord
from skiff.broker.transactions.results import Outcome


@dataclass(slots=True)
class OpenTransaction:
    """An unresolved transaction, as its latest half record describes it."""

    origin: int
    queue_offset: int
    commit_log_offset: int
    check_times: int
    due_ms: int
    """When it is first checked (store time + timeout); 0 for a copy, which is due at every round."""
    group: str


@dataclass(slots=True)
class ClosedTransaction:
    outcome: Outcome
    last_offset: int
    """Queue offset of its last half record (-1 until one is seen)."""


class TransactionTable:
    def __init__(self, half_offset: int, op_offset: int) -> None:
        self.open: dict[int, OpenTransaction] = {}
        self.closed: dict[int, ClosedTransaction] = {}
        self.half_scanned = half_offset
        self.op_scanned = op_offset
        self._ops: collections.deque[tuple[int, int]] = collections.deque()
        """(op queue offset, origin) of the ops read at or after the op offset."""

    # -- reading the queues -----------------------------------------------------

    def see_half(self, half: HalfRecord, timeout_ms: int) -> None:
        """A record of the half queue, read in order; ``timeout_ms`` is transactionTimeOut."""
        self.half_scanned = max(self.half_scanned, half.queue_offset + 1)
        closed = self.closed.get(half.origin)
        if closed is not None:
            closed.last_offset = max(closed.last_offset, half.queue_offset)
            return
        current = self.open.get(half.origin)
        if current is not None and current.queue_offset >= half.queue_offset:
            return
        due = 0 if half.is_copy else half.store_timestamp + max(timeout_ms, half.immunity_ms or 0)
        self.open[half.origin] = OpenTransaction(half.origin, half.queue_offset, half.commit_log_offset,
                                                 half.check_times, due, half.group)

    def skip_half(self, queue_offset: int) -> None:
        """A half-queue record that is not a half message (logged by the caller): passed over."""
        self.half_scanned = max(self.half_scanned, queue_offset + 1)

    def see_op(self, op_offset: int, origin: int | None) -> None:
        """A record of the op queue, read in order (``origin`` None: not an op, passed over)."""
        self.op_scanned = max(self.op_scanned, op_offset + 1)
        if origin is None:
            return
        self._ops.append((op_offset, origin))
        if origin not in self.closed:
            tx = self.open.pop(origin, None)
            self.closed[origin] = ClosedTransaction(Outcome.RESOLVED, -1 if tx is None else tx.queue_offset)

    # -- changes ------------------------------------------------------------------

    def close(self, origin: int, outcome: Outcome) -> None:
        """An open transaction was committed, rolled back or discarded (its op is being written)."""
        tx = self.open.pop(origin)
        self.closed[origin] = ClosedTransaction(outcome, tx.queue_offset)

    def copied(self, origin: int, queue_offset: int, commit_log_offset: int, check_times: int) -> None:
        """A check re-put the open transaction's half message at ``queue_offset``."""
        tx = self.open[origin]
        tx.queue_offset, tx.commit_log_offset, tx.check_times, tx.due_ms = (
            queue_offset, commit_log_offset, check_times, 0)

    # -- queries ------------------------------------------------------------------

    def due(self, now_ms: int) -> list[OpenTransaction]:
        """Open transactions to check this round, oldest first."""
        return sorted((tx for tx in self.open.values() if tx.due_ms <= now_ms), key=lambda tx: tx.queue_offset)

    def half_offset(self) -> int:
        return min((tx.queue_offset for tx in self.open.values()), default=self.half_scanned)

    def settle(self) -> tuple[int, int]:
        """Forget what no restart needs any more; the (half, op) offsets to persist."""
        half = min(self.half_offset(), self.half_scanned)
        self.closed = {o: c for o, c in self.closed.items() if c.last_offset >= half}
        ops = self._ops
        while ops and ops[0][1] not in self.closed:
            ops.popleft()
        return half, ops[0][0] if ops else self.op_scanned
