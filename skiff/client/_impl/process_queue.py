"""A consumer's in-memory state for one queue it holds (RocketMQ's ProcessQueue).

Messages wait here from the pull that fetched them until their listener is done
with them. The offset a consumer may commit is the smallest offset still here:
everything below it is consumed, so a restart from it loses nothing (it may
deliver the in-flight ones again, which is RocketMQ's at-least-once).

The structure is one offset-keyed dict kept in ascending key order: pulls
append ascending offsets, and the rare insertion below the newest (a pull that
overlaps, messages put back) rebuilds it sorted. Its first key is then the
smallest offset in flight, and adding or removing a batch is a few C-level
passes over it (no Python step per message, no sorted container).

Orderly consumption takes messages from the head (`take`), then either commits
them all (`commit`) or puts some back to be consumed again (`restore`).

A consumer that hands out whole pulled batches in pull order (the lite pull
consumer) holds them as runs instead (`add_run`, `remove_run`): one entry per
batch (its messages, first offset, count and body bytes), so releasing a batch
costs nothing per message and holding it one pass for its body bytes. A batch that overlaps what is held
is held message by message, as `add` does.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.client_calls import ProcessQueueInfo

LOCK_VALID_MS = 30_000
"""A lock this client got from the broker is trusted for this long (RocketMQ's
``rocketmq.client.rebalance.lockMaxLiveTime``); the broker's own lasts 60 s."""

PULL_EXPIRED_MS = 120_000
"""A queue whose pulls stopped this long ago is dropped by the next rebalance."""

_OFFSET = operator.attrgetter("queue_offset")
_BODY = operator.attrgetter("body")


def _body_bytes(msgs: Iterable[StoredMessage]) -> int:
    return sum(map(len, map(_BODY, msgs)))


@dataclass(frozen=True, slots=True, eq=False)
class _Run:
    """A batch held whole: its messages, its first offset, how many and their body bytes
    (compared by identity: `deque.remove` finds this run, not an equal one)."""

    msgs: list[StoredMessage]
    first: int
    count: int
    size_bytes: int


class ProcessQueue:
    """In-flight messages of one queue, their count and bytes, and the queue's flags."""

    __slots__ = (
        "_msgs", "_runs", "_consuming", "_clock", "count", "size_bytes", "max_offset", "pulled_to", "dropped",
        "locked",
        "last_lock_ms", "last_pull_ms", "last_consume_ms", "try_unlock_times",
    )

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._msgs: dict[int, StoredMessage] = {}
        """In flight, in ascending offset order (the first key is the smallest)."""
        self._runs: collections.deque[_Run] = collections.deque()
        """Batches held whole (`add_run`), in pull order: ascending, none overlapping."""
        self._consuming: dict[int, StoredMessage] = {}
        self._clock = clock
        self.count = 0
        """Messages held, those being consumed orderly included."""
        self.size_bytes = 0
        """Body bytes held, as RocketMQ counts them for pullThresholdSizeForQueue."""
        self.max_offset = -1
        """Highest queue offset ever added."""
        self.pulled_to = -1
        """Where the last pull left off: every message below it was added here or
        filtered out on the way (by tag or SQL92), so none of them waits."""
        self.dropped = False
        """Set when the queue is no longer this client's: stop pulling and consuming it."""
        self.locked = False
        self.last_lock_ms = 0
        self.last_pull_ms = clock.now_ms()
        self.last_consume_ms = clock.now_ms()
        self.try_unlock_times = 0

    def add(self, msgs: Sequence[StoredMessage]) -> None:
        """Hold ``msgs`` (ascending offsets, as pulls return them); offsets already held are skipped."""
        if not msgs:
            return
        offsets = list(map(_OFFSET, msgs))
        held = self._msgs
        if offsets[0] <= self.max_offset:
            in_runs = {m.queue_offset for run in self._runs for m in run.msgs}
            kept = [(o, m) for o, m in zip(offsets, msgs)
                    if o not in held and o not in self._consuming and o not in in_runs]
            if not kept:
                return
            offsets = [o for o, _ in kept]
            msgs = [m for _, m in kept]
            if held and offsets[0] < next(reversed(held)):
                self._msgs = held = dict(sorted([*held.items(), *kept], key=operator.itemgetter(0)))
        held.update(zip(offsets, msgs))
        self.count += len(offsets)
        self.size_bytes += _body_bytes(msgs)
        self.max_offset = max(self.max_offset, offsets[-1])

    def remove(self, msgs: Sequence[StoredMessage]) -> int:
        """Forget consumed ``msgs``; the offset now safe to commit, or -1 if nothing was held."""
        held = self._msgs
        if not held:
            return -1
        if len(msgs) == 1:  # a listener called per message (RocketMQ's default batch of 1)
            gone_one = held.pop(msgs[0].queue_offset, None)
            if gone_one is not None:
                self.count -= 1
                self.size_bytes -= len(gone_one.body)
            self.last_consume_ms = self._clock.now_ms()
            return self.commit_offset()
        before = len(held)
        popped = list(map(held.pop, map(_OFFSET, msgs), itertools.repeat(None)))
        # Every pop that found its offset shrank held by one: when all did, no None is in popped.
        gone = (cast("list[StoredMessage]", popped) if before - len(held) == len(popped)
                else [m for m in popped if m is not None])
        self.count -= len(gone)
        self.size_bytes -= _body_bytes(gone)
        self.last_consume_ms = self._clock.now_ms()
        return self.commit_offset()

    def add_run(self, msgs: list[StoredMessage]) -> None:
        """Hold a pulled batch whole (ascending offsets), to be released whole by `remove_run`;
        one that overlaps what is held is held message by message (`add`)."""
        if not msgs:
            return
        first = msgs[0].queue_offset
        if first <= self.max_offset:
            self.add(msgs)
            return
        last = msgs[-1].queue_offset
        size = _body_bytes(msgs)
        self._runs.append(_Run(msgs, first, len(msgs), size))
        self.count += len(msgs)
        self.size_bytes += size
        self.max_offset = max(self.max_offset, last)

    def remove_run(self, msgs: list[StoredMessage]) -> int:
        """Release a batch given to `add_run` (the very list); the offset now safe to commit,
        or -1 if nothing was held. A batch not held as a run is removed as `remove` does."""
        runs = self._runs
        run = next((r for r in runs if r.msgs is msgs), None)  # in pull order: the first one
        if run is None:
            return self.remove(msgs)
        runs.remove(run)
        self.count -= run.count
        self.size_bytes -= run.size_bytes
        self.last_consume_ms = self._clock.now_ms()
        return self.commit_offset()

    def commit_offset(self) -> int:
        """The smallest offset still held, or, when none is, where pulls left off."""
        first = self.min_offset()
        return max(self.max_offset + 1, self.pulled_to) if first < 0 else first

    def min_offset(self) -> int:
        """The smallest offset held (in flight or being consumed), -1 when empty."""
        first = next(iter(self._msgs), -1)
        if self._runs:
            run_first = self._runs[0].first
            first = run_first if first < 0 else min(first, run_first)
        if self._consuming:
            taken = min(self._consuming)
            return taken if first < 0 else min(first, taken)
        return first

    @property
    def span(self) -> int:
        """Offsets between the oldest held message and the newest (consumeConcurrentlyMaxSpan)."""
        first = self.min_offset()
        return 0 if first < 0 else self.max_offset - first

    @property
    def empty(self) -> bool:
        return not self._msgs and not self._runs and not self._consuming

    def messages(self) -> list[StoredMessage]:
        """The held messages, oldest first (for tests and running info)."""
        held = [*self._msgs.values(), *self._consuming.values(), *(m for run in self._runs for m in run.msgs)]
        return sorted(held, key=lambda m: m.queue_offset)

    def take(self, limit: int) -> list[StoredMessage]:
        """Orderly: move up to ``limit`` of the oldest messages to the consuming set."""
        held = self._msgs
        out = [held.pop(offset) for offset in list(itertools.islice(held, limit))]
        if out:
            self._consuming.update(zip(map(_OFFSET, out), out))
            self.last_consume_ms = self._clock.now_ms()
        return out

    def commit(self) -> int:
        """Orderly: the consuming set is done; the offset to commit, -1 if there was none."""
        if not self._consuming:
            return -1
        last = max(self._consuming)
        self.count -= len(self._consuming)
        self.size_bytes -= _body_bytes(self._consuming.values())
        self._consuming.clear()
        return last + 1

    def restore(self, msgs: Sequence[StoredMessage]) -> None:
        """Orderly: put ``msgs`` (taken, not consumed) back at the head, to be taken again."""
        back = sorted(msgs, key=_OFFSET)
        for msg in back:
            self._consuming.pop(msg.queue_offset, None)
        self._msgs = {**dict(zip(map(_OFFSET, back), back)), **self._msgs}

    def clear(self) -> None:
        """Drop everything held (a seek, a reset): the next pull starts afresh."""
        self._msgs.clear()
        self._runs.clear()
        self._consuming.clear()
        self.count = 0
        self.size_bytes = 0
        self.max_offset = -1
        self.pulled_to = -1

    def lock_expired(self) -> bool:
        return self._clock.now_ms() - self.last_lock_ms > LOCK_VALID_MS

    def pull_expired(self) -> bool:
        return self._clock.now_ms() - self.last_pull_ms > PULL_EXPIRED_MS

    def mark_locked(self, locked: bool) -> None:
        self.locked = locked
        if locked:
            self.last_lock_ms = self._clock.now_ms()

    def info(self, commit_offset: int) -> ProcessQueueInfo:
        """What GET_CONSUMER_RUNNING_INFO reports about this queue."""
        first = self.min_offset()
        return ProcessQueueInfo(
            commit_offset=commit_offset, cached_msg_min_offset=max(first, 0),
            cached_msg_max_offset=max(self.max_offset, 0), cached_msg_count=self.count,
            cached_msg_size_mib=self.size_bytes // (1024 * 1024), locked=self.locked,
            try_unlock_times=self.try_unlock_times, last_lock_timestamp=self.last_lock_ms,
            droped=self.dropped, last_pull_timestamp=self.last_pull_ms,
            last_consume_timestamp=self.last_consume_ms,
        )
