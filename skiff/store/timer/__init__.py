"""The timer: delayed messages (delay levels and any delivery time up to timerMaxDelaySec),
QMQ's two-level wheel with the CommitLog as its write-ahead log (see docs/timer.md).

It imports only `skiff.common` and `skiff.store`, and runs on threads.
"""

from skiff.store.timer.results import (
    CancelOutcome,
    CancelResult,
    CancelStatus,
    SlotCount,
    TimerRecovery,
    TimerStats,
)
from skiff.store.timer.service import TimerService

__all__ = [
    "CancelOutcome",
    "CancelResult",
    "CancelStatus",
    "SlotCount",
    "TimerRecovery",
    "TimerService",
    "TimerStats",
]
