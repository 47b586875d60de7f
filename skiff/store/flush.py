"""CommitLog flushing: one thread that fsyncs, with group commit for SYNC_FLUSH.

ASYNC_FLUSH: the thread fsyncs whatever was written every flushIntervalCommitLog
ms, and writers never wait.

SYNC_FLUSH (group commit, as Kafka's, Redis's and NATS's): at most one fsync runs
at a time, and the next starts as soon as it ends, covering every byte appended
meanwhile. A writer enqueues the CommitLog offset its write ends at and gets a
future: the *group's*. Every write made while no fsync has yet started for it
joins the one open group and shares its future, so an fsync resolves one future
(one callback, one wake-up of the broker's loop) for all the writes it covers,
not one per write. When the thread starts an fsync it closes the open group
(writes from then on form the next one) and reads the CommitLog's write position
after that, so the fsync covers every member: a PUT_OK always means the member's
bytes were fsynced.

Threads are woken only when there is something for them: the flusher when a
group opens while it sleeps, the timer when the queue of groups was empty; a
write joining an open group wakes nobody (each wake-up of a thread costs the
appending thread a GIL hand-off).

A second thread resolves a group with FLUSH_DISK_TIMEOUT once its first member
has waited syncFlushTimeout ms, even while an fsync hangs, as RocketMQ's waiting
writer would give up. A write joins an open group only within the first half of
that wait, so no member is given up on before half of syncFlushTimeout (they
are answered FLUSH_DISK_TIMEOUT early rather than kept waiting longer).

The group's future is set running when made, so it cannot be cancelled: one
waiter giving up (``asyncio.wrap_future`` cancels the future it wraps) does not
take the answer from the others sharing it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from skiff.store.results import PutStatus

log = logging.getLogger(__name__)

_ERROR_BACKOFF_S = 0.1


class _Group:
    """Writes waiting for the same fsync: the end of the last one, when the first's wait
    runs out, and the future they share."""

    __slots__ = ("end", "deadline", "future")

    def __init__(self, end: int, deadline: float) -> None:
        self.end = end
        self.deadline = deadline
        self.future: concurrent.futures.Future[PutStatus] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()


class CommitLogFlusher:
    """Runs ``flush(keep_tail)`` (fsync what is written, but the last partly written page
    when ``keep_tail``: a periodic flush with nobody waiting; return the flushed offset)
    on its own thread."""

    def __init__(self, flush: Callable[[bool], int], *, interval_ms: int, sync: bool, timeout_ms: int) -> None:
        self._flush = flush
        self._interval_s = interval_ms / 1000
        self._timeout_s = timeout_ms / 1000
        self._join_s = self._timeout_s / 2
        self.sync = sync
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        """The flusher waits on it: stop, or a group opened while it slept."""
        self._expiry = threading.Condition(self._lock)
        """The timer waits on it: stop, or a group queued when none was."""
        self._waiting: deque[_Group] = deque()
        self._open: _Group | None = None
        """The group no fsync has started for yet (the last in ``_waiting``), or None."""
        self._idle = False
        """The flusher is waiting on ``_work``."""
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self.groups = 0
        """Groups made: under SYNC_FLUSH, the futures made for all the writes."""

    def start(self) -> None:
        targets = [self._run, self._expire] if self.sync else [self._run]
        self._threads = [
            threading.Thread(target=t, name=f"skiff-store-{t.__name__.strip('_')}", daemon=True) for t in targets
        ]
        for t in self._threads:
            t.start()

    def request(self, end_offset: int) -> concurrent.futures.Future[PutStatus]:
        """A future that resolves once the CommitLog is fsynced up to ``end_offset`` (the end
        of a write already made: the offsets asked for grow, as writes are made in order)."""
        with self._lock:
            group = self._open
            now = time.monotonic()
            if group is not None and now < group.deadline - self._join_s:
                if end_offset > group.end:
                    group.end = end_offset
                return group.future
            group = self._open = _Group(end_offset, now + self._timeout_s)
            self.groups += 1
            waiting = self._waiting
            waiting.append(group)
            if len(waiting) == 1:
                self._expiry.notify()
            if self._idle:
                self._work.notify()
            return group.future

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._waiting and not self._stopping:
                    self._idle = True
                    self._work.wait(self._interval_s)
                    self._idle = False
                stopping = self._stopping
                keep_tail = not self._waiting and not stopping
                self._open = None  # writes from now on wait for the next fsync
            try:
                flushed = self._flush(keep_tail)
            except OSError:
                log.exception("CommitLog fsync failed")
                time.sleep(_ERROR_BACKOFF_S)
                flushed = -1
            done = []
            with self._lock:
                waiting = self._waiting
                while waiting and waiting[0].end <= flushed:
                    done.append(waiting.popleft())
                if done and self._open is done[-1]:
                    # opened by a write made after the close above but before the fsync read
                    # the write position: covered, so no later write may join it
                    self._open = None
            for group in done:  # outside the lock: the futures' callbacks run here
                _resolve(group.future, PutStatus.PUT_OK)
            if stopping:
                return

    def _expire(self) -> None:
        while True:
            with self._lock:
                while True:
                    if self._stopping:
                        return
                    if not self._waiting:
                        self._expiry.wait()
                        continue
                    group = self._waiting[0]
                    wait_s = group.deadline - time.monotonic()
                    if wait_s <= 0:
                        break
                    self._expiry.wait(wait_s)
                self._waiting.popleft()
                if self._open is group:
                    self._open = None
            _resolve(group.future, PutStatus.FLUSH_DISK_TIMEOUT)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Flush once more, resolve every waiter, and end the threads."""
        with self._lock:
            self._stopping = True
            self._work.notify_all()
            self._expiry.notify_all()
        for t in self._threads:
            t.join(timeout_s)
        self._threads = []
        with self._lock:
            left = list(self._waiting)
            self._waiting.clear()
            self._open = None
        for group in left:
            _resolve(group.future, PutStatus.FLUSH_DISK_TIMEOUT)


def _resolve(future: concurrent.futures.Future[PutStatus], status: PutStatus) -> None:
    try:
        future.set_result(status)
    except concurrent.futures.InvalidStateError:
        pass  # resolved by the other thread meanwhile (a timeout racing the fsync's end)
