"""The in-memory hashed wheel: the scheduled messages of the slots that are near.

Time is cut into ticks of ``tick_ms`` (timerPrecisionMs). A message due at
``due_ms`` waits in the bucket of tick ``due_ms // tick_ms``; when the clock
passes the end of a tick, the whole bucket is due (so nothing is early and
nothing is more than a tick late, plus the time to deliver it). Buckets are
keyed by absolute tick, which makes the wheel's "rounds" unnecessary, and a
heap of tick numbers finds the due ones after any pause, however long.

A bucket holds its rows packed in an ``array('q')`` (`ROW_FIELDS` int64 values
per message, no Python object per message): a million scheduled messages take
about 40 MB. The wheel is not thread-safe; the timer guards it with its lock.
"""

from __future__ import annotations

import heapq
from array import array

import numpy as np

from skiff.store.timer.schedule_log import DUE, ROW_FIELDS, TIMER_ID


class Wheel:
    def __init__(self, tick_ms: int) -> None:
        self.tick_ms = tick_ms
        self._buckets: dict[int, array[int]] = {}
        self._ticks: list[int] = []
        self.size = 0
        """Rows in the wheel."""
        self.deferred = 0
        """Rows ever put in a later bucket than their due time's (a failed delivery waits): while
        there are any, `remove` searches every bucket, not just the due time's."""

    def _bucket(self, tick: int) -> array[int]:
        bucket = self._buckets.get(tick)
        if bucket is None:
            bucket = self._buckets[tick] = array("q")
            heapq.heappush(self._ticks, tick)
        return bucket

    def add(self, row: tuple[int, int, int, int, int], not_before_ms: int = 0) -> None:
        """Add one row; ``not_before_ms`` holds it back past its due time (a retry)."""
        due = row[DUE]
        if not_before_ms > due:
            self.deferred += 1
        self._bucket(max(due, not_before_ms) // self.tick_ms).extend(row)
        self.size += 1

    def add_rows(self, rows: np.ndarray) -> None:
        """Add an (n, `ROW_FIELDS`) int64 array of rows, bucket by bucket."""
        if not len(rows):
            return
        ticks = rows[:, DUE] // self.tick_ms
        order = np.argsort(ticks, kind="stable")
        rows, ticks = np.ascontiguousarray(rows[order]), ticks[order]
        uniq, starts = np.unique(ticks, return_index=True)
        ends = [*starts[1:].tolist(), len(rows)]
        for tick, lo, hi in zip(uniq.tolist(), starts.tolist(), ends):
            self._bucket(tick).frombytes(rows[lo:hi].tobytes())
        self.size += len(rows)

    def take_due(self, now_ms: int, limit: int) -> np.ndarray:
        """Remove and return up to ``limit`` rows of the ticks that ended by ``now_ms``,
        earliest tick first, as an (n, `ROW_FIELDS`) int64 array."""
        current = now_ms // self.tick_ms
        parts: list[array[int]] = []
        taken = 0
        while self._ticks and self._ticks[0] < current and taken < limit:
            tick = self._ticks[0]
            bucket = self._buckets[tick]
            count = len(bucket) // ROW_FIELDS
            if taken + count > limit:
                cut = (limit - taken) * ROW_FIELDS
                parts.append(bucket[:cut])
                del bucket[:cut]
                taken = limit
                break
            heapq.heappop(self._ticks)
            del self._buckets[tick]
            parts.append(bucket)
            taken += count
        self.size -= taken
        if not parts:
            return np.empty((0, ROW_FIELDS), dtype=np.int64)
        return np.frombuffer(b"".join(p.tobytes() for p in parts), dtype=np.int64).reshape(-1, ROW_FIELDS)

    def peek(self, tick: int, start: int = 0, limit: int | None = None) -> np.ndarray:
        """A copy of up to ``limit`` rows of one bucket from row ``start`` (empty when none)."""
        bucket = self._buckets.get(tick)
        if bucket is None:
            return np.empty((0, ROW_FIELDS), dtype=np.int64)
        end = len(bucket) if limit is None else min(len(bucket), (start + limit) * ROW_FIELDS)
        return np.frombuffer(bucket[start * ROW_FIELDS : end].tobytes(), dtype=np.int64).reshape(-1, ROW_FIELDS)

    def _locate(self, due_ms: int, timer_id: int) -> tuple[array[int], int] | None:
        ticks = [due_ms // self.tick_ms]
        if self.deferred:
            ticks += [t for t in self._buckets if t != ticks[0]]
        for tick in ticks:
            bucket = self._buckets.get(tick)
            if bucket is not None:
                ids = bucket[TIMER_ID::ROW_FIELDS]
                if timer_id in ids:
                    return bucket, ids.index(timer_id) * ROW_FIELDS
        return None

    def contains(self, due_ms: int, timer_id: int) -> bool:
        return self._locate(due_ms, timer_id) is not None

    def remove(self, due_ms: int, timer_id: int) -> bool:
        """Take the row of ``timer_id`` out (a cancel); False when it is not in the wheel."""
        found = self._locate(due_ms, timer_id)
        if found is None:
            return False
        bucket, at = found
        del bucket[at : at + ROW_FIELDS]
        self.size -= 1
        return True
