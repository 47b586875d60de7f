"""Concurrent consumption (RocketMQ's ConsumeMessageConcurrentlyService).

Each pulled batch is cut into listener batches of ``consume_message_batch_max_size``
and handed to the runner; batches of one queue may run at the same time and
finish in any order. When one finishes, its messages leave the process queue
and the queue's commit offset (the smallest still in flight) goes to the offset
store, so a message is committed only once everything before it is done.

Failures (RECONSUME_LATER, an exception, or messages past ``ack_index``):
- clustering: each is sent back to the broker (CONSUMER_SEND_MSG_BACK), which
  re-delivers it through the retry topic after a delay, or parks it in the DLQ
  after ``max_reconsume_times``; a message whose send-back fails is consumed
  again locally after `LOCAL_RETRY_DELAY_MS` with its reconsume count raised;
- broadcasting: dropped with a warning, as RocketMQ does (there is no retry topic
  per client).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from skiff.client._impl.consumer_core import ConsumerCore
from skiff.client._impl.listener import SKIPPED, ConsumeConcurrentlyContext, ListenerRunner
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client.results import ConsumeStatus
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage

log = logging.getLogger(__name__)

LOCAL_RETRY_DELAY_MS = 5_000
"""When a send-back fails, the message is consumed again here after this long."""

_SUCCESS = ConsumeStatus.CONSUME_SUCCESS


class ConsumeConcurrentlyService:
    def __init__(self, core: ConsumerCore, runner: ListenerRunner, on_consumed: Callable[[MessageQueue], None],
                 *, local_retry_delay_ms: int = LOCAL_RETRY_DELAY_MS) -> None:
        self._core = core
        self._runner = runner
        self._batch = core.settings.consume_message_batch_max_size
        self._on_consumed = on_consumed
        self._local_retry_delay_ms = local_retry_delay_ms
        self._tasks: set[asyncio.Task[None]] = set()
        self._retries: set[asyncio.Task[None]] = set()

    def submit(self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        """Hand pulled messages (already in ``pq``) to the listener, batch by batch."""
        size = self._batch
        if len(msgs) <= size:
            self._start(list(msgs), pq, mq)
        elif size == 1:  # RocketMQ's default consumeMessageBatchMaxSize: a call per message
            for msg in msgs:
                self._start([msg], pq, mq)
        else:
            for i in range(0, len(msgs), size):
                self._start(list(msgs[i : i + size]), pq, mq)

    def _start(self, batch: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        ctx = ConsumeConcurrentlyContext(mq)
        started = time.monotonic()
        self._runner.submit(batch, ctx, lambda outcome: self._finished(outcome, batch, ctx, pq, started))

    def _finished(self, outcome: object, batch: list[StoredMessage], ctx: ConsumeConcurrentlyContext,
                  pq: ProcessQueue, started: float) -> None:
        if outcome is SKIPPED:
            return  # shutting down: the messages stay uncommitted for the next owner
        counters = self._core.counters
        counters.batches += 1
        counters.consume_rt_ms_total += (time.monotonic() - started) * 1000
        if outcome is _SUCCESS:
            ok = len(batch) if ctx.ack_index is None else max(0, min(ctx.ack_index + 1, len(batch)))
        else:
            if not isinstance(outcome, (ConsumeStatus, BaseException)):
                log.warning("the listener returned %r, not a ConsumeStatus: retrying the batch", outcome)
            ok = 0
        counters.consumed_ok += ok
        counters.consumed_failed += len(batch) - ok
        if pq.dropped:
            return  # the queue moved to another client; it re-delivers what is not committed
        if ok == len(batch):
            self._done(batch, pq, ctx.message_queue)
            return
        failed = batch[ok:]
        if not self._core.settings.clustering:
            for msg in failed:
                log.warning("broadcasting: dropping message %s that the listener failed on", msg.msg_id)
            self._done(batch, pq, ctx.message_queue)
            return
        if ok:
            self._done(batch[:ok], pq, ctx.message_queue)
        self._spawn(self._send_back(failed, pq, ctx), self._tasks)

    def _done(self, msgs: Sequence[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        offset = pq.remove(msgs)
        if offset >= 0 and not pq.dropped:
            self._core.offset_store.update(mq, offset, increase_only=True)
        self._on_consumed(mq)

    async def _send_back(self, failed: list[StoredMessage], pq: ProcessQueue, ctx: ConsumeConcurrentlyContext) -> None:
        mq = ctx.message_queue
        results = await asyncio.gather(
            *(self._core.send_back(m, mq, ctx.delay_level_when_next_consume) for m in failed), return_exceptions=True)
        sent, local = [], []
        for msg, result in zip(failed, results):
            if isinstance(result, BaseException):
                log.warning("sending message %s back to the broker failed (%s): consuming it again here in %d ms",
                            msg.msg_id, result, self._local_retry_delay_ms)
                local.append(msg._replace(reconsume_times=msg.reconsume_times + 1))
            else:
                sent.append(msg)
        if sent:
            self._done(sent, pq, mq)
        if local:
            self._spawn(self._retry_later(local, pq, mq), self._retries)

    async def _retry_later(self, msgs: list[StoredMessage], pq: ProcessQueue, mq: MessageQueue) -> None:
        await asyncio.sleep(self._local_retry_delay_ms / 1000)
        if not pq.dropped:
            self.submit(msgs, pq, mq)

    @staticmethod
    def _spawn(coro: Coroutine[Any, Any, None], into: set[asyncio.Task[None]]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        into.add(task)
        task.add_done_callback(into.discard)

    async def close(self) -> None:
        """Drop local retries (their messages stay uncommitted) and wait for send-backs
        under way (their offsets commit)."""
        for task in self._retries:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
