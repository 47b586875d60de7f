"""Orderly consumption (RocketMQ's ConsumeMessageOrderlyService).

One task per queue with messages waiting takes the oldest batch, calls the
listener, and only then takes the next: a queue is consumed by one listener
call at a time, in offset order. In clustering mode the queue must be locked
on its broker (LOCK_BATCH_MQ) by this client, so no other member of the group
consumes it meanwhile; the lock is renewed every `LOCK_RENEW_INTERVAL_MS`.

SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception) puts the same batch back at
the head of the queue and waits ``suspend_current_queue_time_ms`` before the
next try: nothing behind it is consumed first and nothing is skipped. A
message that has failed ``max_reconsume_times`` times is moved to the group's
DLQ (a send-back with delay level -1) and counts as consumed.

A batch consumed after its queue was dropped (rebalanced away) is not
committed: the next owner, which starts from the committed offset, gets it
again, so order holds across owners at the price of that batch twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from skiff.client._impl.consumer_core import DLQ_DELAY_LEVEL, ConsumerCore
from skiff.client._impl.listener import SKIPPED, ConsumeOrderlyContext, ListenerRunner
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client.results import ConsumeOrderlyStatus
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage

log = logging.getLogger(__name__)

LOCK_RENEW_INTERVAL_MS = 20_000
"""How often an orderly consumer re-locks its queues (RocketMQ's REBALANCE_LOCK_INTERVAL)."""
LOCK_RETRY_MS = 3_000
"""Wait after failing to lock a queue before trying again."""


class ConsumeOrderlyService:
    def __init__(self, core: ConsumerCore, runner: ListenerRunner,
                 lock: Callable[[MessageQueue], Awaitable[bool]],
                 on_consumed: Callable[[MessageQueue], None], *, lock_retry_ms: int = LOCK_RETRY_MS) -> None:
        self._core = core
        self._runner = runner
        self._lock = lock
        self._on_consumed = on_consumed
        self._lock_retry_ms = lock_retry_ms
        self._batch = core.settings.consume_message_batch_max_size
        self._max_reconsume = core.settings.max_reconsume(orderly=True)
        self._running: dict[MessageQueue, asyncio.Task[None]] = {}
        self._closing = False

    def submit(self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        """New messages are in ``pq``: make sure the queue's task runs.

        A task that has returned stays in ``_running`` until its done-callback runs on a
        later turn of the loop; a pull answered in between must start a new task, or its
        messages wait for the next pull (forever, once the producer stops)."""
        current = self._running.get(mq)
        if (current is None or current.done()) and not self._closing:
            task = asyncio.get_running_loop().create_task(self._consume(pq, mq), name=f"consume {mq}")
            self._running[mq] = task
            task.add_done_callback(lambda t: self._running.pop(mq, None) if self._running.get(mq) is t else None)

    async def _consume(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        clustering = self._core.settings.clustering
        while not pq.dropped and not self._closing:
            if clustering and (not pq.locked or pq.lock_expired()):
                if not await self._lock(mq):
                    await asyncio.sleep(self._lock_retry_ms / 1000)
                    continue
            msgs = pq.take(self._batch)
            if not msgs:
                return
            if not await self._consume_batch(msgs, pq, mq):
                return

    async def _consume_batch(self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> bool:
        """Consume one batch; False when the queue's task should end."""
        ctx = ConsumeOrderlyContext(mq, self._core.settings.suspend_current_queue_time_ms)
        started = time.monotonic()
        outcome = await self._runner.run(msgs, ctx)
        if outcome is SKIPPED:
            pq.restore(msgs)
            return False
        counters = self._core.counters
        counters.batches += 1
        counters.consume_rt_ms_total += (time.monotonic() - started) * 1000
        if pq.dropped:
            return False  # not committed: the queue's next owner consumes it again, in order
        if outcome is ConsumeOrderlyStatus.SUCCESS:
            counters.consumed_ok += len(msgs)
            self._commit(pq, mq)
            return True
        if not isinstance(outcome, (ConsumeOrderlyStatus, BaseException)):
            log.warning("the orderly listener returned %r, not a ConsumeOrderlyStatus: suspending", outcome)
        counters.consumed_failed += len(msgs)
        again = await self._give_up_or_retry(msgs, mq)
        if not again:
            self._commit(pq, mq)
            return True
        pq.restore(again)
        await asyncio.sleep(max(ctx.suspend_current_queue_time_ms, 0) / 1000)
        return True

    async def _give_up_or_retry(self, msgs: list[StoredMessage], mq: MessageQueue) -> list[StoredMessage]:
        """Send the messages that failed too often to the DLQ; the rest, counted once more, are retried."""
        again = []
        for msg in msgs:
            if msg.reconsume_times >= self._max_reconsume:
                try:
                    await self._core.send_back(msg, mq, DLQ_DELAY_LEVEL)
                    log.warning("message %s of %s failed %d times: moved to the DLQ", msg.msg_id, mq,
                                msg.reconsume_times + 1)
                    continue
                except Exception as exc:  # noqa: BLE001 - keep it and try again later
                    log.warning("moving message %s to the DLQ failed: %s", msg.msg_id, exc)
            again.append(msg._replace(reconsume_times=msg.reconsume_times + 1))
        return again

    def _commit(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            self._core.offset_store.update(mq, offset)
        self._on_consumed(mq)

    async def wait_queue(self, mq: MessageQueue, timeout_s: float) -> bool:
        """Wait for the batch being consumed on ``mq`` (if any); False if it outlasts the timeout."""
        task = self._running.get(mq)
        if task is None:
            return True
        done, _ = await asyncio.wait([task], timeout=timeout_s)
        return bool(done)

    async def close(self, timeout_s: float) -> None:
        """Start no more batches; wait for those being consumed, then stop the tasks."""
        self._closing = True
        tasks = list(self._running.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
