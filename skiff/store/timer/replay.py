"""The replay: SCHEDULE_TOPIC_XXXX's consume queues, copied into schedule logs.

The CommitLog is the write-ahead log: the broker parks each delayed message
there, and the replay follows every queue of the topic from its progress,
appends each record to the schedule log of its due time's slot (and to the
wheel when that slot is loaded), and advances the in-memory progress. A
commit makes it durable in this order: the CommitLog is fsynced past what was
replayed (so a schedule record never outlives its parked record), the schedule
logs are fsynced, then the progress file (queue offsets and each log's length)
replaces the old one. A crash loses only what came after the last commit, and
the next start cuts it from the logs and replays it again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from skiff.common.clock import Clock
from skiff.common.files import replace_atomically
from skiff.common.names import SCHEDULE_TOPIC
from skiff.store.message_store import MessageStore
from skiff.store.results import GetResult, GetStatus
from skiff.store.timer.formats import (
    SCHEDULE_HEAD,
    SCHEDULE_MAGIC,
    Progress,
    SlotLength,
    encode_progress,
)
from skiff.store.timer.parked import Parked, parse_parked
from skiff.store.timer.schedule_log import ScheduleLog, ScheduleLogs
from skiff.store.timer.slots import SlotKeeper, TimerState

log = logging.getLogger(__name__)

REPLAY_BATCH = 1024
"""Consume-queue entries read per step (the store's pull limit)."""
REPLAY_STEPS_PER_PASS = 32
"""Steps per queue in one pass, so loading and retiring slots are never starved."""

_LOST_STATUSES = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING})

Row = tuple[int, int, int, int, int]


def records_of(result: GetResult) -> Iterator[memoryview]:
    """The records of a pull answer, one view each."""
    for buf in result.buffers:
        pos = 0
        while pos < len(buf):
            size = int.from_bytes(buf[pos : pos + 4], "big")
            yield buf[pos : pos + size]
            pos += size


class Replayer:
    def __init__(self, store: MessageStore, state: TimerState, logs: ScheduleLogs, keeper: SlotKeeper,
                 progress_path: str, clock: Clock) -> None:
        self.store = store
        self.state = state
        self.logs = logs
        self.keeper = keeper
        self.progress_path = progress_path
        self.clock = clock
        self.caught_up = False
        self.unroutable = 0
        self._replayed_since_commit = False

    def start_from(self, queues: dict[int, int]) -> list[str]:
        """Resume from committed offsets, kept within each queue's current bounds."""
        notes = []
        for q, offset in queues.items():
            lo, hi = self.store.get_min_offset(SCHEDULE_TOPIC, q), self.store.get_max_offset(SCHEDULE_TOPIC, q)
            if offset > hi:
                notes.append(f"SCHEDULE_TOPIC_XXXX queue {q} ends at {hi}, before the replayed {offset}; resumed there")
            elif offset < lo:
                log.error("SCHEDULE_TOPIC_XXXX queue %d lost entries %d..%d before they were replayed", q, offset, lo)
                notes.append(f"SCHEDULE_TOPIC_XXXX queue {q} starts at {lo}, after the replayed {offset}")
            self.state.progress[q] = min(max(offset, lo), hi)
        return notes

    def replay(self) -> int:
        """Replay what the queues hold now (up to a bound per queue); return how many records."""
        done = 0
        caught_up = True
        for q in sorted(self.store.queue_ids(SCHEDULE_TOPIC)):
            end = self.store.get_max_offset(SCHEDULE_TOPIC, q)
            for _ in range(REPLAY_STEPS_PER_PASS):
                if self.state.progress.get(q, -1) >= end:
                    break
                done += self._step(q)
            caught_up = caught_up and self.state.progress.get(q, -1) >= end
        self.caught_up = caught_up
        return done

    def _step(self, q: int) -> int:
        offset = self.state.progress.get(q)
        if offset is None:
            offset = self.store.get_min_offset(SCHEDULE_TOPIC, q)
        result = self.store.get_messages(SCHEDULE_TOPIC, q, offset, REPLAY_BATCH)
        if result.status in _LOST_STATUSES:
            log.error("SCHEDULE_TOPIC_XXXX queue %d: entries %d..%d are gone (%s) before they were replayed",
                      q, offset, result.next_begin_offset, result.status.name)
        elif result.status is GetStatus.OFFSET_OVERFLOW_BADLY:
            log.warning("SCHEDULE_TOPIC_XXXX queue %d shrank to %d entries; replay resumes there", q, result.next_begin_offset)
        elif not result.found:
            return 0
        rows = self._replay_batch(result) if result.found else []
        self._register(rows, q, result.next_begin_offset)
        return result.message_count

    def _replay_batch(self, result: GetResult) -> list[Row]:
        by_slot: dict[int, list[tuple[Parked, bytes]]] = {}
        for view in records_of(result):
            parked = parse_parked(view)
            if isinstance(parked, str):
                self.unroutable += 1
                log.error("%s; it is not delivered", parked)
                continue
            by_slot.setdefault(self.keeper.slot_of(parked.due_ms), []).append((parked, bytes(view)))
        horizon = self.state.horizon_ms
        for slot in by_slot:
            if slot <= horizon and slot not in self.state.loaded:
                self.keeper.load(slot)  # before the append, so the wheel gets the new rows once
        self._replayed_since_commit = True
        return self._append(by_slot)

    def _append(self, by_slot: dict[int, list[tuple[Parked, bytes]]]) -> list[Row]:
        """Write each slot's records in one append; on a failure undo the batch and raise."""
        rows: list[Row] = []
        undo: list[tuple[ScheduleLog, SlotLength]] = []
        try:
            for slot, items in by_slot.items():
                f = self.logs.get_or_create(slot)
                undo.append((f, f.committed()))
                parts: list[bytes] = []
                sizes: list[int] = []
                for parked, raw in items:
                    size = SCHEDULE_HEAD.size + len(raw)
                    parts += (SCHEDULE_HEAD.pack(size, SCHEDULE_MAGIC, parked.due_ms, parked.timer_id), raw)
                    sizes.append(size)
                pos = f.append(b"".join(parts), len(items))
                for (parked, _), size in zip(items, sizes):
                    rows.append((parked.due_ms, parked.timer_id, slot, pos, size))
                    pos += size
        except OSError:
            for f, length in undo[:-1]:
                f.cut(length)
            raise
        return rows

    def _register(self, rows: list[Row], q: int, next_offset: int) -> None:
        """Wheel rows of loaded slots and the new progress, in one step: a cancel sees a
        message either not replayed yet or in the wheel (or excluded from it)."""
        state = self.state
        with state.lock:
            for row in rows:
                slot = state.loaded.get(row[2])
                if slot is not None and not slot.excludes(row[1]):
                    state.wheel.add(row)
                    slot.outstanding += 1
            state.progress[q] = next_offset

    def commit(self) -> None:
        """Make the replay so far durable (see the module docstring). Raises OSError."""
        if self._replayed_since_commit:
            self.store.flush()
        self.logs.sync()
        with self.state.lock:
            queues = dict(self.state.progress)
            loaded = set(self.state.loaded)
        replace_atomically(self.progress_path, encode_progress(Progress(queues, self.logs.committed()), self.clock.now_ms()))
        self._replayed_since_commit = False
        self.logs.close_except(loaded)
        self.keeper.unlink_retired()
