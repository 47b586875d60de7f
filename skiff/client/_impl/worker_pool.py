"""Threads for plain-function listeners, with results handed back to the event loop in bunches.

`loop.run_in_executor` costs, per job, a concurrent future chained to an asyncio
one and a wake-up of the loop (a write to its self-pipe) for each result. Here a
job is one tuple on a `queue.SimpleQueue`; finished jobs go on a deque, and the
loop is woken once for all the results that arrive before it runs: under load,
one wake-up carries many. Threads start on demand, up to ``threads``.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
from collections.abc import Callable
from typing import Any

_STOP = None


class WorkerPool:
    def __init__(self, threads: int, *, name: str = "worker") -> None:
        self._max_threads = threads
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._results: collections.deque[tuple[asyncio.Future[Any], Any]] = collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on a worker; the future gets what it returns (or raises)."""
        loop = self._loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fut, fn, args))
        with self._lock:
            start = self._idle == 0 and len(self._threads) < self._max_threads
        if start:
            self._start_thread()
        return fut

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
            if job is _STOP:
                return
            fut, fn, args = job
            try:
                outcome: Any = (True, fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the future's owner
                outcome = (False, exc)
            self._results.append((fut, outcome))
            with self._lock:
                if self._wake_pending:
                    continue
                self._wake_pending = True
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:  # the loop is closed: nobody waits for these any more
                return

    def _deliver(self) -> None:
        with self._lock:
            self._wake_pending = False
        results = self._results
        while results:
            fut, (ok, value) = results.popleft()
            if fut.done():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def shutdown(self) -> None:
        """Let the threads end once the jobs already queued are done."""
        for _ in self._threads:
            self._jobs.put(_STOP)
        self._threads.clear()
