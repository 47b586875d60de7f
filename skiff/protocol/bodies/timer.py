"""Bodies of the timer's admin answers: Skiff's GET_TIMER_SLOTS and CANCEL_SCHEDULED_MESSAGE,
RocketMQ's GET_ALL_DELAY_OFFSET.

    {"slotMs":3600000,"precisionMs":100,
     "slots":[{"slotStartMs":1714561200000,"scheduled":12,"loaded":true}],
     "stats":{"scheduled":12,"inWheel":12,"delivered":40,"cancelled":1,...}}

    {"msgId":"7F00...","status":"CANCELLED",
     "outcomes":[{"timerId":4182,"slotStartMs":1714561200000,"dueMs":1714562000000,"status":"CANCELLED"}]}

    {"offsetTable":{"1":120,"2":0}}
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.protocol.bodies.base import JsonBody


class CancelStatus(enum.StrEnum):
    """What a cancel did to one scheduled message (the store timer's `CancelStatus`, by name)."""

    CANCELLED = "CANCELLED"
    """It will never be delivered."""
    ALREADY_DELIVERED = "ALREADY_DELIVERED"
    """Too late: it was put to its real topic (or is being put). Nothing is undone."""
    ALREADY_CANCELLED = "ALREADY_CANCELLED"
    NOT_FOUND = "NOT_FOUND"
    """No scheduled message has this id on that broker."""


def overall_status(statuses: list[CancelStatus]) -> CancelStatus:
    """CANCELLED when any copy was; else the first other outcome; NOT_FOUND when there is none."""
    if CancelStatus.CANCELLED in statuses:
        return CancelStatus.CANCELLED
    found = [s for s in statuses if s is not CancelStatus.NOT_FOUND]
    return found[0] if found else CancelStatus.NOT_FOUND


@dataclass(frozen=True, slots=True)
class TimerSlot(JsonBody):
    """Scheduled messages (not yet delivered or cancelled) of one slot of due times."""

    slot_start_ms: int
    scheduled: int
    loaded: bool = False
    """The slot is near: its messages are in the in-memory wheel."""


@dataclass(frozen=True, slots=True)
class TimerStatsBody(JsonBody):
    """The timer's counters (since the broker started) and delivery lateness."""

    scheduled: int = 0
    in_wheel: int = 0
    delivered: int = 0
    cancelled: int = 0
    dropped: int = 0
    unroutable: int = 0
    replay_lag: int = 0
    slots_on_disk: int = 0
    slots_loaded: int = 0
    lateness_p50_ms: float = 0.0
    lateness_p99_ms: float = 0.0
    lateness_max_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class TimerSlotsBody(JsonBody):
    slot_ms: int
    precision_ms: int
    slots: tuple[TimerSlot, ...] = ()
    stats: TimerStatsBody = TimerStatsBody()


@dataclass(frozen=True, slots=True)
class CancelOutcomeBody(JsonBody):
    timer_id: int
    """The CommitLog offset of the parked record."""
    slot_start_ms: int
    due_ms: int
    status: CancelStatus


@dataclass(frozen=True, slots=True)
class CancelScheduledBody(JsonBody):
    msg_id: str
    status: CancelStatus
    outcomes: tuple[CancelOutcomeBody, ...] = ()


@dataclass(frozen=True, slots=True)
class DelayOffsetBody(JsonBody):
    """GET_ALL_DELAY_OFFSET's answer, what a RocketMQ slave writes to its delayOffset.json:
    per delay level, the offset in SCHEDULE_TOPIC_XXXX's queue level - 1 below which
    everything is delivered."""

    offset_table: Mapping[int, int] = field(default_factory=dict)
