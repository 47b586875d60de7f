"""Group commit for replication: SYNC_MASTER sends waiting for a slave's acknowledgement.

Sends are appended on the event loop in CommitLog order and all wait the same
``slaveTimeout``, so the waiters form one queue ordered both by offset and by
deadline. An acknowledgement resolves the front of the queue up to its offset
(one slave round trip answers every send it covers); one timer handle, set for
the front's deadline, times the front out. Nothing polls per message.

A waiter is a callback, not a future: the send's answer is written from it, with no
future, task or coroutine per send.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Done = Callable[[bool], None]
"""Called once: True when a slave has the bytes, False after ``slaveTimeout``."""


class ReplicaWaiters:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._queue: deque[tuple[int, float, Done]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """Kept from the first wait: asking asyncio for it costs a getpid() call per send."""
        self.acked = 0
        """The furthest offset a slave acknowledged (RocketMQ's push2SlaveMaxOffset)."""

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, end: int, done: Done) -> bool:
        """Call ``done`` once a slave has every byte below ``end`` (or it timed out); False if
        it has them already (``done`` is then not called)."""
        if end <= self.acked:
            return False
        loop = self._loop or self._bind()
        self._queue.append((end, loop.time() + self.timeout_s, done))
        if self._timer is None:
            self._arm(loop)
        return True

    def ack(self, offset: int) -> None:
        """A slave has every byte below ``offset``: answer the waiters it covers."""
        if offset <= self.acked:
            return
        self.acked = offset
        queue = self._queue
        while queue and queue[0][0] <= offset:
            _answer(queue.popleft()[2], True)

    def fail_all(self) -> None:
        """Time every waiter out now (shutdown)."""
        while self._queue:
            _answer(self._queue.popleft()[2], False)
        self._disarm()

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = loop.call_at(self._queue[0][1], self._expire) if self._queue else None

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _bind(self) -> asyncio.AbstractEventLoop:
        self._loop = asyncio.get_running_loop()
        return self._loop

    def _expire(self) -> None:
        loop = self._loop or self._bind()
        now = loop.time()
        queue = self._queue
        while queue and queue[0][1] <= now:
            _answer(queue.popleft()[2], False)
        self._arm(loop)


def _answer(done: Done, ok: bool) -> None:
    """A waiter writes its send's answer: its failure is logged, and the other waiters are
    still answered (and the timer re-armed)."""
    try:
        done(ok)
    except Exception:
        log.exception("answering a send waiting for its replica failed")
