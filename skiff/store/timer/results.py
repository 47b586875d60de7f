"""What the timer reports: recovery, per-slot counts, cancellations and statistics."""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TimerRecovery:
    """What `TimerService.recover` found and repaired."""

    notes: tuple[str, ...]
    """Uncommitted schedule-log tails cut, torn dispatch-log tails cut, files missing."""
    deliveries_recovered: int
    """Deliveries found in the CommitLog's tail that the dispatch logs did not hold yet."""
    commitlog_scanned_bytes: int
    slots_on_disk: int
    slots_loaded: int
    scheduled: int
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class SlotCount:
    """Scheduled messages (not yet delivered or cancelled) of one slot."""

    slot_start_ms: int
    scheduled: int
    loaded: bool
    """The slot's messages are in the in-memory wheel."""


class CancelStatus(enum.Enum):
    CANCELLED = 0
    """It will never be delivered."""
    ALREADY_DELIVERED = 1
    """Too late: it was put to its real topic (or is being put now). Nothing is undone; consumers get it."""
    ALREADY_CANCELLED = 2
    NOT_FOUND = 3
    """No parked message has this id (or its record and its slot are both gone)."""


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What a cancel did to one parked message."""

    timer_id: int
    """The CommitLog offset of the parked record."""
    slot_start_ms: int
    due_ms: int
    status: CancelStatus


@dataclass(frozen=True, slots=True)
class CancelResult:
    """A cancel by message id: one outcome per parked message the id names (a UNIQ_KEY names
    every retry of a message; an offsetMsgId names one record)."""

    msg_id: str
    outcomes: tuple[CancelOutcome, ...]

    @property
    def status(self) -> CancelStatus:
        """CANCELLED when any message was; otherwise the first outcome, or NOT_FOUND."""
        statuses = [o.status for o in self.outcomes]
        if CancelStatus.CANCELLED in statuses:
            return CancelStatus.CANCELLED
        return statuses[0] if statuses else CancelStatus.NOT_FOUND


@dataclass(frozen=True, slots=True)
class TimerStats:
    scheduled: int
    """Messages on disk not yet delivered or cancelled (a cancel ahead of its replay counts
    until the replay reaches the message)."""
    in_wheel: int
    delivered: int
    """Delivered since start."""
    cancelled: int
    dropped: int
    """Refused by the store for good (MESSAGE_ILLEGAL...) since start; logged."""
    unroutable: int
    """Parked records without a real topic or queue, skipped by the replay since start; logged."""
    replay_lag: int
    """SCHEDULE_TOPIC_XXXX consume-queue entries not replayed yet."""
    slots_on_disk: int
    slots_loaded: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    """Over the last `LATENESS_WINDOW` deliveries: store time of the delivery minus due time."""
