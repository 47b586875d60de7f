"""Slots: which schedule logs are in the wheel, and when a slot's files go.

A slot is loaded into the wheel when it comes near (its start ≤ now +
timerLookaheadMs); from then on the replay adds its new messages straight to
the wheel. Loading skips what the slot's dispatch log and this run's cancels
exclude. A slot is deleted once it is past, everything in it was delivered or
cancelled, the deliveries are in a durable dispatch log, and the replay has
caught up (so no late message for it can still come).

Deletion is two-step so a crash never leaves a dispatch log gone while its
schedule log stays (that would deliver the slot again): the slot leaves the
in-memory tables at once; its schedule log is unlinked after the next progress
commit (which no longer names it), then its dispatch log.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from skiff.store.timer.dispatch_log import DispatchLogs
from skiff.store.timer.formats import Outcome
from skiff.store.timer.schedule_log import ROW_FIELDS, TIMER_ID, ScheduleLogs
from skiff.store.timer.wheel import Wheel

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class LoadedSlot:
    """A slot whose messages are in the wheel (mutable; guarded by `TimerState.lock`)."""

    slot_ms: int
    outstanding: int = 0
    """Rows added to the wheel and not yet delivered, dropped or cancelled."""
    finished_before: set[int] = field(default_factory=set)
    """Timer ids delivered or dropped in earlier runs (the dispatch log when loaded)."""
    cancelled: set[int] = field(default_factory=set)

    def excludes(self, timer_id: int) -> bool:
        return timer_id in self.finished_before or timer_id in self.cancelled


class TimerState:
    """What the replay, delivery and admin threads share; every field is guarded by ``lock``."""

    def __init__(self, tick_ms: int) -> None:
        self.lock = threading.Lock()
        self.wheel = Wheel(tick_ms)
        self.loaded: dict[int, LoadedSlot] = {}
        self.cancels: dict[int, set[int]] = {}
        """Timer ids cancelled in this run in slots not loaded (merged when they load)."""
        self.undurable: dict[int, list[int]] = {}
        """Timer ids delivered and stored, not yet in a dispatch log (the next checkpoint writes them)."""
        self.progress: dict[int, int] = {}
        """Next SCHEDULE_TOPIC_XXXX consume-queue offset to replay, per queue."""
        self.horizon_ms = -1
        """Slots starting at or before this are loaded."""
        self.durable_lock = threading.Lock()
        """Held by a checkpoint from taking `undurable` until it is in the dispatch logs, and by
        slot retirement, so a slot never goes while its deliveries are not durable."""


class SlotKeeper:
    def __init__(self, state: TimerState, logs: ScheduleLogs, dispatch: DispatchLogs, slot_ms: int,
                 lookahead_ms: int) -> None:
        self.state = state
        self.logs = logs
        self.dispatch = dispatch
        self.slot_ms = slot_ms
        self.lookahead_ms = lookahead_ms
        self._doomed: set[int] = set()

    def slot_of(self, due_ms: int) -> int:
        return due_ms - due_ms % self.slot_ms

    def load_near(self, now_ms: int) -> int:
        """Load every slot on disk that starts by ``now_ms`` + lookahead; return how many."""
        horizon = now_ms + self.lookahead_ms
        loaded = 0
        for slot in sorted(s for s in self.logs.logs if s <= horizon and s not in self.state.loaded):
            self.load(slot)
            loaded += 1
        with self.state.lock:
            self.state.horizon_ms = max(self.state.horizon_ms, horizon)
        return loaded

    def load(self, slot_ms: int) -> None:
        """Put the slot's messages that are still due into the wheel (on the replay thread, or
        before it starts)."""
        f = self.logs.logs.get(slot_ms)
        rows, problem = (np.empty((0, ROW_FIELDS), dtype=np.int64), "") if f is None else f.rows()
        if problem:
            log.error("%s; the messages after it are not delivered", problem)
        outcomes = self.dispatch.read(slot_ms)
        finished = {i for i, kind in outcomes.items() if kind is not Outcome.CANCELLED}
        state = self.state
        with state.lock:
            cancelled = {i for i, kind in outcomes.items() if kind is Outcome.CANCELLED}
            cancelled |= state.cancels.pop(slot_ms, set())
            if finished or cancelled:
                rows = rows[~np.isin(rows[:, TIMER_ID], list(finished | cancelled))]
            state.wheel.add_rows(rows)
            state.loaded[slot_ms] = LoadedSlot(slot_ms, len(rows), finished, cancelled)

    def retire_done(self, now_ms: int, caught_up: bool) -> int:
        """Take finished past slots out of the tables; their files go at the next commit, which
        the caller makes before it replays again. Return how many slots wait for it."""
        if caught_up:
            self._doomed |= self._finished_slots(now_ms)
        return len(self._doomed)

    def _finished_slots(self, now_ms: int) -> set[int]:
        state = self.state
        with state.durable_lock, state.lock:
            done = {s for s, st in state.loaded.items()
                    if s + self.slot_ms <= now_ms and not st.outstanding and s not in state.undurable}
            for slot in done:
                del state.loaded[slot]
        for slot in done:
            self.logs.retire(slot)
        orphans = {s for s in self.dispatch.slots()
                   if s + self.slot_ms <= now_ms and s not in self.logs.logs and s not in state.loaded}
        return done | orphans

    def unlink_retired(self) -> None:
        """After a commit that no longer names them: unlink retired slots' schedule logs, then
        their dispatch logs (a slot that got messages again meanwhile stays)."""
        for slot in self._doomed:
            if slot not in self.logs.logs:
                self.logs.unlink(slot)
                self.dispatch.delete(slot)
        self._doomed.clear()
