"""Delivery: due rows become messages in their real topics; checkpoints make that durable.

Each step takes the due rows from the wheel, reads their records from the
schedule logs, rebuilds the messages (`parked.delivery_input`, which marks each
with ``TIMER_ID``) and puts them to the store in batches per real queue, in due
order (equal due times in send order). The CommitLog is the source of truth
for what was delivered: a checkpoint fsyncs it, appends the deliveries since
the last checkpoint to the dispatch logs, fsyncs them, and then records the
CommitLog offset it covered. After a crash, `recover_deliveries` reads the
CommitLog from that offset and puts the ``TIMER_ID`` deliveries it finds into
the dispatch logs, so none is delivered twice and none is lost.

A put the store refuses for now (disk full, shutting down) is retried after
`RETRY_DELAY_MS`; one it refuses for good (MESSAGE_ILLEGAL) is retried alone,
and a message refused alone is logged and recorded as dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from skiff.common.clock import Clock
from skiff.common.errors import DecodeError
from skiff.common.files import replace_atomically
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import (
    FIXED_BYTES_V4,
    HOST_V4_BYTES,
    HOST_V6_BYTES,
    read_head,
    read_tail,
)
from skiff.store.message_store import MessageStore
from skiff.store.results import MessageInput, PutStatus
from skiff.store.timer.dispatch_log import DispatchLogs
from skiff.store.timer.formats import (
    SCHEDULE_HEAD,
    Outcome,
    decode_checkpoint,
    encode_checkpoint,
    read_small_file,
)
from skiff.store.timer.parked import TIMER_ID_MARK, delivery_input, parse_marker
from skiff.store.timer.schedule_log import DUE, SLOT, TIMER_ID, ScheduleLogs
from skiff.store.timer.slots import TimerState

log = logging.getLogger(__name__)

DELIVER_BATCH = 4096
"""Rows one step takes from the wheel (more due ones wait for the next step, at once)."""
PUT_BATCH_MAX_MESSAGES = 256
PUT_BATCH_MAX_BYTES = 1 << 20
"""One put carries at most this many records and bytes (less when CommitLog files are small)."""
RECORD_OVERHEAD_BYTES = FIXED_BYTES_V4 + 2 * (HOST_V6_BYTES - HOST_V4_BYTES) + 8
"""A record's bytes beyond body, properties and topic, at most (IPv6 hosts; UTF-8 topics stay
well inside the slack of `PUT_BATCH_MAX_BYTES` against the file size)."""
PREPARE_AHEAD_MS = 5000
PREPARE_ROWS_PER_STEP = 4096
"""Rows one tick builds ahead of time (about 30 ms of work), so the next tick is not held up."""
PREPARE_MAX_ROWS = 200_000
"""Messages built ahead and kept in memory at most."""
RETRY_DELAY_MS = 1000
LATENESS_WINDOW = 100_000
"""Deliveries whose lateness `lateness_ms` keeps."""

_NOTHING_READY: tuple[dict[int, MessageInput], int] = ({}, 0)
_PERMANENT = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})


class Deliverer:
    def __init__(self, store: MessageStore, state: TimerState, logs: ScheduleLogs, dispatch: DispatchLogs,
                 checkpoint_path: str, clock: Clock) -> None:
        self.store = store
        self.state = state
        self.logs = logs
        self.dispatch = dispatch
        self.checkpoint_path = checkpoint_path
        self.clock = clock
        self.delivered = self.dropped = 0
        self.retrying_until_ms = 0
        """Until then a delivery put that failed waits in the wheel for its retry."""
        self._checkpointed = -1
        self._lateness = np.zeros(LATENESS_WINDOW, dtype=np.int64)
        self._lateness_count = 0
        self._batch_bytes = min(PUT_BATCH_MAX_BYTES, store.config.mapped_file_size_commit_log // 4)
        self._prepared: dict[int, tuple[dict[int, MessageInput], int]] = {}
        """Messages built ahead (`prepare`) by tick: (message by timer id, rows looked at)."""

    # -- delivering ---------------------------------------------------------------

    def deliver_due(self, now_ms: int) -> int:
        """Deliver what is due by ``now_ms`` (up to `DELIVER_BATCH` rows); return the rows taken."""
        with self.state.lock:
            rows = self.state.wheel.take_due(now_ms, DELIVER_BATCH)
        if not len(rows):
            return 0
        rows = rows[np.lexsort((rows[:, TIMER_ID], rows[:, DUE]))]
        ok, retry, dropped = self._put_all(rows)
        self._settle(rows, ok, retry, dropped, now_ms)
        return len(rows)

    def _put_all(self, rows: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """Put every row's message; return row indexes delivered, to retry, and dropped."""
        queues: dict[tuple[str, int], list[tuple[int, MessageInput]]] = {}
        dropped: list[int] = []
        tick_ms = self.state.wheel.tick_ms
        for i, row in enumerate(rows.tolist()):
            msg = self._prepared.get(row[DUE] // tick_ms, _NOTHING_READY)[0].get(row[TIMER_ID]) or self._build(row)
            if msg is None:
                dropped.append(i)
            else:
                queues.setdefault((msg.topic, msg.queue_id), []).append((i, msg))
        ok: list[int] = []
        retry: list[int] = []
        for items in queues.values():
            for chunk in self._chunks(items):
                self._put(chunk, ok, retry, dropped)
        return ok, retry, dropped

    def _build(self, row: list[int]) -> MessageInput | None:
        """The message of a wheel row, or None (logged) when its record cannot give one."""
        _, _, slot, pos, size = row
        try:
            return delivery_input(self.logs.logs[slot].read(pos, size)[SCHEDULE_HEAD.size :], slot)
        except (DecodeError, KeyError, ValueError, OSError) as exc:
            log.error("the schedule record at %d in slot %d cannot be delivered: %s", pos, slot, exc)
            return None

    def prepare(self, now_ms: int, budget: int = PREPARE_ROWS_PER_STEP) -> int:
        """Build the messages of rows due within `PREPARE_AHEAD_MS` before they are due, up to
        ``budget`` rows, so that when a burst falls due only its puts are left. Each row is
        looked at once (a bucket only grows at its end; a row a cancel shifts past is simply
        built when due). Ticks that have passed are forgotten. Returns how many were built."""
        tick_ms = self.state.wheel.tick_ms
        first = now_ms // tick_ms
        for tick in [t for t in self._prepared if t < first]:
            del self._prepared[tick]
        budget = min(budget, PREPARE_MAX_ROWS - sum(len(ready) for ready, _ in self._prepared.values()))
        built = 0
        for tick in range(first, (now_ms + PREPARE_AHEAD_MS) // tick_ms + 1):
            ready, seen = self._prepared.get(tick, ({}, 0))
            with self.state.lock:
                rows = self.state.wheel.peek(tick, seen, max(0, budget - built))
            for row in rows.tolist():
                if row[DUE] // tick_ms == tick:  # not a retry held back from an earlier tick
                    msg = self._build(row)
                    if msg is not None:
                        ready[row[TIMER_ID]] = msg
            self._prepared[tick] = (ready, seen + len(rows))
            built += len(rows)
            if built >= budget:
                break
        return built

    def _chunks(self, items: list[tuple[int, MessageInput]]) -> list[list[tuple[int, MessageInput]]]:
        chunks: list[list[tuple[int, MessageInput]]] = [[]]
        used = 0
        for item in items:
            m = item[1]
            size = RECORD_OVERHEAD_BYTES + len(m.body) + len(m.properties) + len(m.topic)
            if chunks[-1] and (used + size > self._batch_bytes or len(chunks[-1]) >= PUT_BATCH_MAX_MESSAGES):
                chunks.append([])
                used = 0
            chunks[-1].append(item)
            used += size
        return chunks

    def _put(self, chunk: Sequence[tuple[int, MessageInput]], ok: list[int], retry: list[int],
             dropped: list[int]) -> None:
        result = self.store.put_messages([m for _, m in chunk])
        indexes = [i for i, _ in chunk]
        if result.ok:
            ok += indexes
        elif result.status not in _PERMANENT:
            log.warning("the store refused %d due messages (%s: %s); retrying in %d ms",
                        len(chunk), result.status.name, result.reason, RETRY_DELAY_MS)
            retry += indexes
        elif len(chunk) > 1:
            for item in chunk:
                self._put([item], ok, retry, dropped)
        else:
            m = chunk[0][1]
            log.error("the store refused the due message %s for %s:%d for good (%s: %s); it is dropped",
                      m.uniq_key, m.topic, m.queue_id, result.status.name, result.reason)
            dropped += indexes

    def _settle(self, rows: np.ndarray, ok: list[int], retry: list[int], dropped: list[int], now_ms: int) -> None:
        if ok:
            done = rows[ok]
            self._record_lateness(self.clock.now_ms() - done[:, DUE])
        state = self.state
        with state.lock:
            for i in ok:
                slot = int(rows[i, SLOT])
                state.loaded[slot].outstanding -= 1
                state.undurable.setdefault(slot, []).append(int(rows[i, TIMER_ID]))
            for i in retry:
                state.wheel.add(tuple(rows[i].tolist()), not_before_ms=now_ms + RETRY_DELAY_MS)
        if retry:
            self.retrying_until_ms = now_ms + RETRY_DELAY_MS + self.state.wheel.tick_ms
        self.delivered += len(ok)
        self._drop(rows[dropped])

    def _drop(self, rows: np.ndarray) -> None:
        by_slot: dict[int, list[int]] = {}
        for _, timer_id, slot, _, _ in rows.tolist():
            by_slot.setdefault(slot, []).append(timer_id)
        for slot, ids in by_slot.items():
            try:
                self.dispatch.append(slot, Outcome.DROPPED, ids)
            except OSError as exc:  # without the record a restart tries them again
                log.error("cannot record %d dropped messages of slot %d: %s", len(ids), slot, exc)
            with self.state.lock:
                self.state.loaded[slot].outstanding -= len(ids)
        self.dropped += len(rows)

    def _record_lateness(self, values: np.ndarray) -> None:
        values = values[-LATENESS_WINDOW:]
        at = self._lateness_count % LATENESS_WINDOW
        first = min(len(values), LATENESS_WINDOW - at)
        self._lateness[at : at + first] = values[:first]
        self._lateness[: len(values) - first] = values[first:]
        self._lateness_count += len(values)

    def lateness_ms(self) -> np.ndarray:
        """Lateness of the last deliveries (up to `LATENESS_WINDOW`), ms."""
        return self._lateness[: min(self._lateness_count, LATENESS_WINDOW)].copy()

    # -- durability ---------------------------------------------------------------

    def checkpoint(self) -> None:
        """fsync the CommitLog, write the deliveries since the last checkpoint to the dispatch
        logs, then record the CommitLog offset covered. Raises OSError (they wait for the next)."""
        state = self.state
        with state.durable_lock:
            end = self.store.max_physical_offset
            with state.lock:
                batch, state.undurable = state.undurable, {}
            if not batch and end == self._checkpointed:
                return
            try:
                self.store.flush()
                while batch:
                    slot, ids = next(iter(batch.items()))
                    self.dispatch.append(slot, Outcome.DELIVERED, ids)
                    del batch[slot]
                replace_atomically(self.checkpoint_path, encode_checkpoint(end, self.clock.now_ms()))
            except OSError:
                with state.lock:
                    for slot, ids in batch.items():
                        state.undurable.setdefault(slot, []).extend(ids)
                raise
            self._checkpointed = end

    def recover_deliveries(self, fresh: bool) -> tuple[int, int]:
        """Put deliveries stored after the last checkpoint into the dispatch logs; return how
        many were missing from them and how many CommitLog bytes were read. ``fresh``: the
        timer never ran on this store, so nothing can have been delivered."""
        end = self.store.max_physical_offset
        raw = read_small_file(self.checkpoint_path)
        if fresh:
            start = end
        elif raw is None:
            start = self.store.min_physical_offset
            log.warning("no timer checkpoint: reading the whole CommitLog for deliveries")
        else:
            start = min(max(decode_checkpoint(raw, self.checkpoint_path), self.store.min_physical_offset), end)
        try:
            deliveries = self._deliveries_between(start, end)
        except DecodeError as exc:
            # a checkpoint inside a record: the CommitLog was cut below it and written again
            # (`skiff.store.timer.cut` lowers it when that happens; this is for stores cut before)
            log.warning("timer checkpoint %d is not at a record (%s): reading the whole CommitLog for "
                        "deliveries", start, exc)
            start = self.store.min_physical_offset
            deliveries = self._deliveries_between(start, end)
        missing = 0
        for slot, ids in deliveries.items():
            known = self.dispatch.read(slot)
            new = [i for i in dict.fromkeys(ids) if i not in known]
            self.dispatch.append(slot, Outcome.DELIVERED, new)
            missing += len(new)
        replace_atomically(self.checkpoint_path, encode_checkpoint(end, self.clock.now_ms()))
        self._checkpointed = end
        return missing, end - start

    def _deliveries_between(self, start: int, end: int) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for _, view in self.store.commitlog.iter_records(start, end):
            head = read_head(view)
            tail = read_tail(view, 0, head)
            if TIMER_ID_MARK not in tail.properties_raw or tail.topic == SCHEDULE_TOPIC:
                continue
            mark = parse_marker(decode_properties(tail.properties_raw).get(Prop.TIMER_ID))
            if mark is not None:
                found.setdefault(mark[0], []).append(mark[1])
        return found
