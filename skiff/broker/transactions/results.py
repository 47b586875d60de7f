"""What the transaction service reports: how an END_TRANSACTION ended, what a check
round did, what recovery found. Expected outcomes are these values, never exceptions."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skiff.store import PutResult


class Outcome(enum.Enum):
    """How a transaction was closed."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    DISCARDED = "discarded after transactionCheckMax checks"
    RESOLVED = "resolved"
    """Closed by an op record read back from the op queue (after a restart): which way is not recorded."""


class EndStatus(enum.Enum):
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    LEFT_OPEN = "left open"
    """commitOrRollback 0 (unknown): nothing done, the broker will ask the producer group."""
    ALREADY_DONE = "already done"
    """The same decision arrived again (a retry, or an answer to an earlier check): nothing done."""
    ALREADY_CLOSED = "already closed"
    """The transaction was closed another way (or long ago): refused, nothing done."""
    NOT_FOUND = "not found"
    WRONG_GROUP = "wrong group"
    WRONG_OFFSET = "wrong offset"
    BAD_DECISION = "bad decision"
    COMMIT_REFUSED = "commit refused"
    """The committed message cannot be made (a bad DELAY property, ...): left open, checked later."""
    PUT_FAILED = "put failed"
    """The store did not take the committed message (disk full, ...): left open, checked later."""


@dataclass(frozen=True, slots=True)
class EndResult:
    """The outcome of one END_TRANSACTION; ``put`` is the commit's store result when there was one."""

    status: EndStatus
    remark: str = ""
    put: PutResult | None = None


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What one check round did."""

    checked: int = 0
    """CHECK_TRANSACTION_STATE requests sent."""
    waiting: int = 0
    """Due transactions whose producer group had no live connection (not counted as checks)."""
    discarded: int = 0
    """Moved to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax checks."""
    failed: int = 0
    """Due transactions the store would not take a copy of (retried next round)."""


@dataclass(frozen=True, slots=True)
class TransactionRecovery:
    """Where the service resumed at start and what it rebuilt."""

    half_offset: int
    op_offset: int
    half_scanned: int
    op_scanned: int
    open_transactions: int
    notes: tuple[str, ...] = ()
