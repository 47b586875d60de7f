"""CommitLog flushing: one thread that fsyncs, with group commit for SYNC_FLUSH.

ASYNC_FLUSH: the thread fsyncs whatever was written every flushIntervalCommitLog
ms, and writers never wait.

SYNC_FLUSH: a writer enqueues the CommitLog offset its write ends at and gets a
future. The thread fsyncs once for everything waiting (writes that arrive during
an fsync wait for the next one, which covers all of them) and resolves every
future whose offset the fsync covered with PUT_OK. A second thread resolves a
future with FLUSH_DISK_TIMEOUT once it has waited syncFlushTimeout ms, even
while an fsync hangs, as RocketMQ's waiting writer would give up.
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


def _resolve(future: concurrent.futures.Future[PutStatus], status: PutStatus) -> None:
    if not future.done():
        try:
            future.set_result(status)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled by its waiter meanwhile


class CommitLogFlusher:
    """Runs ``flush(keep_tail)`` (fsync what is written, but the last partly written page
    when ``keep_tail``: a periodic flush with nobody waiting; return the flushed offset)
    on its own thread."""

    def __init__(self, flush: Callable[[bool], int], *, interval_ms: int, sync: bool, timeout_ms: int) -> None:
        self._flush = flush
        self._interval_s = interval_ms / 1000
        self._timeout_s = timeout_ms / 1000
        self.sync = sync
        self._cond = threading.Condition()
        self._waiting: deque[tuple[int, float, concurrent.futures.Future[PutStatus]]] = deque()
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        targets = [self._run, self._expire] if self.sync else [self._run]
        self._threads = [
            threading.Thread(target=t, name=f"skiff-store-{t.__name__.strip('_')}", daemon=True) for t in targets
        ]
        for t in self._threads:
            t.start()

    def request(self, end_offset: int) -> concurrent.futures.Future[PutStatus]:
        """A future that resolves once the CommitLog is fsynced up to ``end_offset``."""
        future: concurrent.futures.Future[PutStatus] = concurrent.futures.Future()
        with self._cond:
            self._waiting.append((end_offset, time.monotonic() + self._timeout_s, future))
            self._cond.notify_all()
        return future

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._waiting and not self._stopping:
                    self._cond.wait(self._interval_s)
                stopping = self._stopping
                keep_tail = not self._waiting and not stopping
            try:
                flushed = self._flush(keep_tail)
            except OSError:
                log.exception("CommitLog fsync failed")
                time.sleep(_ERROR_BACKOFF_S)
                flushed = -1
            with self._cond:
                while self._waiting and self._waiting[0][0] <= flushed:
                    _resolve(self._waiting.popleft()[2], PutStatus.PUT_OK)
            if stopping:
                return

    def _expire(self) -> None:
        with self._cond:
            while not self._stopping:
                if not self._waiting:
                    self._cond.wait()
                    continue
                _, deadline, future = self._waiting[0]
                wait_s = deadline - time.monotonic()
                if wait_s > 0 and not future.done():
                    self._cond.wait(wait_s)
                    continue
                self._waiting.popleft()
                _resolve(future, PutStatus.FLUSH_DISK_TIMEOUT)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Flush once more, resolve every waiter, and end the threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout_s)
        self._threads = []
        with self._cond:
            while self._waiting:
                _resolve(self._waiting.popleft()[2], PutStatus.FLUSH_DISK_TIMEOUT)
