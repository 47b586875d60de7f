"""Listeners and how they are called: the contexts they get, and one runner that
calls a plain function on a bounded thread pool or an ``async def`` on the loop
under a semaphore.

A listener gets a batch (up to ``consume_message_batch_max_size`` messages of
one queue) and answers for the whole batch. The runner never makes a task per
message: a plain function costs one job of a `WorkerPool` per batch; a coroutine
handed over by `submit` is one job of a deque drained by at most ``concurrency``
worker tasks (made when jobs wait and fewer run, gone when the deque is empty),
so a backlog consumed one message per call (RocketMQ's default batch of 1) makes
no task, future or semaphore turn per message; `run` (the orderly service's:
one batch at a time per queue) awaits a coroutine listener in the caller's task.

At shutdown the runner stops starting batches (`close`): those already queued
come back as `SKIPPED` without reaching the listener, so their messages stay
uncommitted and go to the queue's next owner; `drain` waits for the batches
already inside the listener.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from skiff.client._impl.worker_pool import WorkerPool
from skiff.client.results import ConsumeOrderlyStatus, ConsumeStatus
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """What a concurrent listener may read and set for its batch.

    ``ack_index``: on CONSUME_SUCCESS, messages after this index count as failed
    and are retried (None: the whole batch succeeded). ``delay_level_when_next_consume``:
    the retry's delay level (0: the broker picks 3 + reconsume times; -1: straight to the DLQ).
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int | None = None


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """What an orderly listener may read and set: how long to wait before the same
    batch is delivered again after SUSPEND_CURRENT_QUEUE_A_MOMENT."""

    message_queue: MessageQueue
    suspend_current_queue_time_ms: int


Messages = list[StoredMessage]
Done = Callable[[Any], None]
"""Called on the loop with a submitted batch's outcome (the listener's answer, its exception, or SKIPPED)."""
ConcurrentListener = Callable[
    [Messages, ConsumeConcurrentlyContext], Union[ConsumeStatus, Awaitable[ConsumeStatus]]
]
OrderlyListener = Callable[
    [Messages, ConsumeOrderlyContext], Union[ConsumeOrderlyStatus, Awaitable[ConsumeOrderlyStatus]]
]


class _Skipped:
    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED: Any = _Skipped()
"""The outcome of a batch the runner did not start because it is closing."""


def is_async_listener(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class ListenerRunner:
    """Calls one listener, at most ``concurrency`` batches at a time.

    `call` returns a future of the listener's answer, of the exception it raised
    (returned, not raised: a failing listener is an outcome, retried), or `SKIPPED`.
    """

    def __init__(self, fn: Callable[..., Any], concurrency: int, *, name: str = "consume") -> None:
        self._fn = fn
        self.is_async = is_async_listener(fn)
        self._semaphore = asyncio.Semaphore(concurrency) if self.is_async else None
        self._pool = None if self.is_async else WorkerPool(concurrency, name=name)
        self._concurrency = concurrency
        self._jobs: collections.deque[tuple[Sequence[StoredMessage], object, Done]] = collections.deque()
        self._workers: set[asyncio.Task[None]] = set()
        self._taking = 0
        """Worker tasks taking jobs now (at most ``concurrency``)."""
        self._closing = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def inflight(self) -> int:
        """Batches handed to the runner and not finished (queued ones included)."""
        return self._inflight

    def call(self, msgs: Sequence[StoredMessage], ctx: object) -> asyncio.Future[Any]:
        if self._pool is not None:
            fut: asyncio.Future[Any] = self._pool.submit(self._invoke_sync, msgs, ctx)
        else:
            fut = asyncio.get_running_loop().create_task(self._invoke_async(msgs, ctx))
        self._inflight += 1
        self._idle.clear()
        fut.add_done_callback(self._finished)
        return fut

    async def run(self, msgs: Sequence[StoredMessage], ctx: object) -> Any:
        """`call`'s outcome, awaited by the caller: a coroutine listener runs in the caller's own
        task (the orderly service's per-queue task), under the same semaphore, no task per batch."""
        if self._pool is not None:
            return await self.call(msgs, ctx)
        self._inflight += 1
        self._idle.clear()
        try:
            return await self._invoke_async(msgs, ctx)
        finally:
            self._finished(None)

    def submit(self, msgs: Sequence[StoredMessage], ctx: object, done: Done) -> None:
        """Run the listener on ``msgs`` and call ``done(outcome)`` on the loop: `call`'s outcomes
        without a future per batch (a coroutine listener's batch is a job for the worker tasks)."""
        if self._pool is not None:
            self.call(msgs, ctx).add_done_callback(lambda f: None if f.cancelled() else done(f.result()))
            return
        self._inflight += 1
        self._idle.clear()
        self._jobs.append((msgs, ctx, done))
        if self._taking < self._concurrency:
            self._taking += 1
            task = asyncio.get_running_loop().create_task(self._work())
            self._workers.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._workers.discard)

    async def _work(self) -> None:
        """Take submitted jobs until none waits: at most ``concurrency`` of these run at once.
        ``_taking`` drops the moment this one stops taking jobs (not when its task's done
        callback runs a step later), so a job submitted in between starts a new worker."""
        jobs = self._jobs
        try:
            while jobs:
                msgs, ctx, done = jobs.popleft()
                try:
                    outcome = SKIPPED if self._closing else await self._outcome(msgs, ctx)
                finally:
                    self._finished(None)
                try:
                    done(outcome)
                except Exception:  # a bookkeeping bug must not stop the jobs queued behind it
                    log.exception("handling a listener's outcome failed")
        finally:
            self._taking -= 1

    async def _outcome(self, msgs: Sequence[StoredMessage], ctx: object) -> Any:
        try:
            return await self._fn(msgs, ctx)
        except Exception as exc:  # noqa: BLE001 - a failing listener means "retry these"
            log.warning("the listener raised on %d message(s) of %s: %r", len(msgs),
                        getattr(ctx, "message_queue", "?"), exc, exc_info=True)
            return exc

    def _finished(self, _: asyncio.Future[Any] | None) -> None:
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()

    def _invoke_sync(self, msgs: Sequence[StoredMessage], ctx: object) -> Any:
        if self._closing:
            return SKIPPED
        try:
            return self._fn(msgs, ctx)
        except Exception as exc:  # noqa: BLE001 - a failing listener means "retry these"
            log.warning("the listener raised on %d message(s) of %s: %r", len(msgs),
                        getattr(ctx, "message_queue", "?"), exc, exc_info=True)
            return exc

    async def _invoke_async(self, msgs: Sequence[StoredMessage], ctx: object) -> Any:
        assert self._semaphore is not None
        async with self._semaphore:
            if self._closing:
                return SKIPPED
            return await self._outcome(msgs, ctx)

    def close(self) -> None:
        """Start no more batches."""
        self._closing = True

    async def drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the batches inside the listener; False if some still run."""
        self.close()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except asyncio.TimeoutError:
            log.warning("%d listener batch(es) still running after %.1f s", self._inflight, timeout_s)
            return False

    def shutdown(self) -> None:
        """End the threads; batches still queued come back as `SKIPPED` (the runner is closed)."""
        self.close()
        if self._pool is not None:
            self._pool.shutdown()
