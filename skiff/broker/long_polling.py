"""Long polling: pulls that found nothing wait for a message instead of returning empty.

A pull with the SUSPEND flag that finds no new message is held, keyed by its
(topic, queue id), for up to its ``suspendTimeoutMillis`` (15 s from push
consumers; ``shortPollingTimeMills`` when long polling is off). It is answered:

- as soon as the store dispatches new entries past its offset to its queue: the
  store's dispatch listener calls `notify` once per appended batch, on whatever
  thread appended (the broker's loop, or the timer's thread), and `notify`
  hops onto the event loop; the pull is then run again and answered if it
  finds something. A pull whose answer is already full (the queue grew by its
  ``maxMsgNums`` or more) is answered inside `notify`; the others wait for one
  wake-up after the current loop step, which gathers the appends of that step
  (single sends of one read) into one answer. Deferring a full one gained
  nothing and cost 2-3 ms p50 of batched e2e latency: the step runs the other
  appends of its read first (docs/performance.md, issue 26);
- when `wake` names its queue (from any thread): the tier has the row group a pull held for
  it ready (skiff.broker.tier.reads);
- at every ``longPollingRecheckInterval`` (5 s) re-check, whatever woke it;
- at its timeout, with whatever the pull finds then;
- at shutdown, at once, so the server can drain (the pull processor then answers
  "shutting down" rather than "no new message", so clients back off instead of
  pulling again into a connection that is about to close).

At most `limits.LONG_POLL_MAX_SUSPENDED` pulls are held; past that a pull is
answered at once.

A held pull is a `LateAnswer` (`HeldPull`), not a future: the connection registers
where its answer goes, and the wake-up writes it from its own callback, in the same
loop step, without a future, its done callbacks and the step they wait for (a push
consumer's pull is held whenever it has caught up, so every message delivered at a
steady rate costs a wake-up).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence

from skiff.common.limits import LONG_POLL_MAX_SUSPENDED
from skiff.common.service import Periodic
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport.late import LateAnswer

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
_NEVER_FULL = 1 << 63
Rerun = Callable[[bool], RemotingCommand | None]
"""Runs the held pull again: ``rerun(final)`` returns the answer, or None to keep
waiting (never None when ``final``)."""


class HeldPull(LateAnswer[RemotingCommand]):
    """A held pull: what it re-reads, its timer, and (as a `LateAnswer`) its answer."""

    __slots__ = ("key", "offset", "full_at", "rerun", "timer")

    def __init__(self, key: QueueKey, offset: int, rerun: Rerun, full_at: int) -> None:
        super().__init__()
        self.key = key
        self.offset = offset
        self.full_at = full_at
        """The queue's max offset at which this pull's answer is full (answered at once)."""
        self.rerun = rerun
        self.timer: asyncio.TimerHandle | None = None


class PullHoldService:
    def __init__(self, recheck_interval_ms: int, max_suspended: int = LONG_POLL_MAX_SUSPENDED) -> None:
        self.max_suspended = max_suspended
        self._held: dict[QueueKey, list[HeldPull]] = {}
        self._count = 0
        self._woken: dict[QueueKey, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._recheck = Periodic("long-polling-recheck", recheck_interval_ms / 1000.0, self.recheck)
        self._closed = False

    @property
    def held_count(self) -> int:
        return self._count

    @property
    def closed(self) -> bool:
        """True from `stop` on: the broker is shutting down and holds nothing more."""
        return self._closed

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._recheck.start()

    async def stop(self) -> None:
        """Answer every held pull now and hold no more."""
        self._closed = True
        await self._recheck.stop()
        for pulls in list(self._held.values()):
            for held in list(pulls):
                self._answer(held, held.rerun(True))

    def hold(self, key: QueueKey, offset: int, rerun: Rerun, timeout_ms: int,
             max_nums: int | None = None) -> HeldPull | None:
        """Hold a pull at ``offset`` of queue ``key`` that reads up to ``max_nums`` messages
        (None: no bound known, never answered inside `notify`); None when it must be answered now."""
        if self._closed or self._loop is None or self._count >= self.max_suspended:
            return None
        full_at = offset + max_nums if max_nums is not None and max_nums > 0 else _NEVER_FULL
        held = HeldPull(key, offset, rerun, full_at)
        held.timer = self._loop.call_later(max(0, timeout_ms) / 1000.0, self._expire, held)
        self._held.setdefault(key, []).append(held)
        self._count += 1
        return held

    def notify(self, touched: Sequence[tuple[str, int, int]]) -> None:
        """The store's dispatch listener: (topic, queue id, new max offset) per queue grown."""
        if not self._count or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._collect(touched)
            return
        try:
            self._loop.call_soon_threadsafe(self._collect, touched)
        except RuntimeError:  # the loop is closed: the broker is shutting down
            pass

    def _collect(self, touched: Sequence[tuple[str, int, int]]) -> None:
        """Answer the held pulls whose answer is full now; remember the queues of the others,
        woken once after the current loop step."""
        first = not self._woken
        held = self._held
        for topic, queue_id, max_offset in touched:
            key = (topic, queue_id)
            pulls = held.get(key)
            if pulls is None:
                continue
            for pull in [p for p in pulls if p.full_at <= max_offset]:
                self._try(pull, False)
            if key in held:
                self._woken[key] = max(max_offset, self._woken.get(key, 0))
        if first and self._woken and self._loop is not None:
            self._loop.call_soon(self._wake)

    def _wake(self) -> None:
        woken, self._woken = self._woken, {}
        for key, max_offset in woken.items():
            for held in list(self._held.get(key, ())):
                if held.offset < max_offset:
                    self._try(held, False)

    def wake(self, keys: Sequence[QueueKey]) -> None:
        """Run the held pulls of ``keys`` again, on the event loop (callable from any thread)."""
        if self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._rerun_queues, keys)
        except RuntimeError:  # the loop is closed: the broker is shutting down
            pass

    def _rerun_queues(self, keys: Sequence[QueueKey]) -> None:
        for key in keys:
            for held in list(self._held.get(key, ())):
                self._try(held, False)

    def recheck(self) -> None:
        """Run every held pull again; answer those that find something."""
        for pulls in list(self._held.values()):
            for held in list(pulls):
                self._try(held, False)

    def _expire(self, held: HeldPull) -> None:
        held.timer = None
        self._try(held, True)

    def _try(self, held: HeldPull, final: bool) -> None:
        try:
            answer = held.rerun(final)
        except Exception as exc:
            log.exception("a held pull of %s failed", held.key)
            self._answer(held, RemotingCommand(code=ResponseCode.SYSTEM_ERROR, remark=f"the pull failed: {exc!r}"))
            return
        if answer is not None:
            self._answer(held, answer)

    def _answer(self, held: HeldPull, answer: RemotingCommand | None) -> None:
        self._remove(held)
        if answer is not None:
            held.give(answer)

    def _remove(self, held: HeldPull) -> None:
        pulls = self._held.get(held.key)
        if pulls is None or held not in pulls:
            return
        pulls.remove(held)
        self._count -= 1
        if not pulls:
            del self._held[held.key]
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
