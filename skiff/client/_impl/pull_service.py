"""Pull loops: one asyncio task per queue a consumer holds, each pulling that queue
in order with long polling (RocketMQ's PullMessageService + PullAPIWrapper).

A loop asks its handler whether to pull now (`PullHandler.hold_ms`: flow
control, a lost lock, a pause); when held it waits until woken (`wake`, called
when consumption frees room) or the hold runs out. Each pull goes through the
shared `pull_api.Puller` (broker choice, one-pass decoding, the exact tag
re-check); its messages reach the handler as one batch, with RETRY_TOPIC
restored on those of the group's retry topic.

Statuses: FOUND → continue from ``nextBeginOffset``; NO_NEW_MSG and
NO_MATCHED_MSG → the same (and the handler may record the progress);
OFFSET_ILLEGAL → continue from the broker's offset, which is also committed
(the messages before it are gone). A failed pull is retried after a back-off.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from skiff.client._impl.consumer_core import ConsumerCore, Subscription, restore_retry_topic
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client._impl.pull_api import Puller, pull_sys_flag
from skiff.client._impl.wakeup import Wakeup
from skiff.client.results import PullStatus
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage

log = logging.getLogger(__name__)

PUSH_SUSPEND_MS = 15_000
"""How long a push consumer asks the broker to hold a pull with no message (RocketMQ's 15 s)."""
LITE_SUSPEND_MS = 20_000
"""The lite pull consumer's hold (RocketMQ's brokerSuspendMaxTimeMillis)."""
PULL_TIMEOUT_MS = 30_000
"""Client-side timeout of a held pull: longer than any hold."""
ERROR_BACKOFF_MS = 3_000
"""Wait after a failed pull (RocketMQ's pullTimeDelayMillsWhenException)."""
FLOW_BACKOFF_MS = 50
"""Wait when flow control holds a queue, unless consumption wakes the loop sooner."""


_FLAG = pull_sys_flag(suspend=True)
_FLAG_WITH_COMMIT = pull_sys_flag(commit_offset=True, suspend=True)
"""The two sysFlags a consumer's pulls carry, made once (flag arithmetic on IntFlags is slow)."""


@dataclass(eq=False, slots=True)
class PullRequest:
    """One held queue's pull state."""

    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    subscription: Subscription
    wake: Wakeup = field(default_factory=Wakeup)
    stopped: bool = False
    """Set when its loop is told to end (cancelling alone may not reach a loop between awaits)."""


@dataclass(frozen=True, slots=True)
class PullSettings:
    batch_size: int
    suspend_ms: int = PUSH_SUSPEND_MS
    timeout_ms: int = PULL_TIMEOUT_MS
    commit_offset: bool = True
    """Piggy-back the consumed offset on each pull (push consumers in clustering mode)."""
    error_backoff_ms: int = ERROR_BACKOFF_MS


class PullHandler(Protocol):
    def hold_ms(self, req: PullRequest) -> int:
        """0 to pull now, else how long to wait (a `PullService.wake` cuts it short)."""
        ...

    def on_found(self, req: PullRequest, msgs: list[StoredMessage]) -> None:
        """New messages of ``req``'s queue (never empty), in offset order."""
        ...

    def on_no_message(self, req: PullRequest) -> None:
        """A pull found nothing new (``req.next_offset`` already moved on)."""
        ...


class PullService:
    """The pull loops of one consumer."""

    def __init__(self, core: ConsumerCore, settings: PullSettings, handler: PullHandler) -> None:
        self._core = core
        self._settings = settings
        self._handler = handler
        self._puller = Puller(core.instance.api, core.instance.routes)
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._requests: dict[MessageQueue, PullRequest] = {}

    @property
    def requests(self) -> dict[MessageQueue, PullRequest]:
        return self._requests

    def start(self, req: PullRequest) -> None:
        """Start pulling ``req``'s queue (replacing a loop already running for it)."""
        self.stop(req.mq)
        self._requests[req.mq] = req
        task = asyncio.get_running_loop().create_task(self._loop(req), name=f"pull {req.mq}")
        self._tasks[req.mq] = task
        task.add_done_callback(lambda t: self._forget(req.mq, t))

    def _forget(self, mq: MessageQueue, task: asyncio.Task[None]) -> None:
        if self._tasks.get(mq) is task:
            del self._tasks[mq]
            self._requests.pop(mq, None)

    def stop(self, mq: MessageQueue) -> None:
        task = self._tasks.pop(mq, None)
        req = self._requests.pop(mq, None)
        if req is not None:
            req.stopped = True
        if task is not None:
            task.cancel()

    async def stop_all(self) -> None:
        tasks = list(self._tasks.values())
        for mq in list(self._tasks):
            self.stop(mq)
        await asyncio.gather(*tasks, return_exceptions=True)

    def wake(self, mq: MessageQueue) -> None:
        req = self._requests.get(mq)
        if req is not None:
            req.wake.set()

    async def _loop(self, req: PullRequest) -> None:
        while not req.pq.dropped and not req.stopped:
            hold = self._handler.hold_ms(req)
            if hold > 0:
                await self._wait(req, hold)
                continue
            try:
                await self._pull_once(req)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed pull is retried, whatever the cause
                if req.pq.dropped or req.stopped:
                    return
                log.warning("pulling %s of group %s failed: %s; again in %d ms", req.mq, self._core.group, exc,
                            self._settings.error_backoff_ms)
                await self._wait(req, self._settings.error_backoff_ms)

    @staticmethod
    async def _wait(req: PullRequest, ms: int) -> None:
        await req.wake.wait(ms / 1000)

    async def _pull_once(self, req: PullRequest) -> None:
        core = self._core
        settings = self._settings
        sub = req.subscription
        commit_offset = core.offset_store.read_memory(req.mq) if settings.commit_offset else 0
        req.pq.last_pull_ms = core.clock.now_ms()
        started = time.monotonic()
        result = await self._puller.pull(
            req.mq, req.next_offset, settings.batch_size, group=core.group, sub_expression=sub.expression,
            expression_type=sub.selector.expression_type.value, sub_version=sub.sub_version,
            sys_flag=_FLAG_WITH_COMMIT if commit_offset > 0 else _FLAG,
            commit_offset=max(commit_offset, 0), suspend_timeout_ms=settings.suspend_ms,
            timeout_ms=settings.timeout_ms,
        )
        counters = core.counters
        counters.pulls += 1
        counters.pull_rt_ms_total += (time.monotonic() - started) * 1000
        if req.pq.dropped or req.stopped:
            return
        if result.status is PullStatus.OFFSET_ILLEGAL:
            await self._offset_moved(req, result.next_begin_offset)
            return
        req.next_offset = req.pq.pulled_to = result.next_begin_offset
        msgs = result.messages
        if msgs and req.mq.topic == core.retry_topic:
            msgs = restore_retry_topic(msgs, core.retry_topic)
        if msgs:
            counters.pulled += len(msgs)
            self._handler.on_found(req, msgs)
        else:
            self._handler.on_no_message(req)

    async def _offset_moved(self, req: PullRequest, offset: int) -> None:
        log.warning("offset %d of %s is not in the queue any more; the broker says to go on from %d",
                    req.next_offset, req.mq, offset)
        req.next_offset = offset
        store = self._core.offset_store
        store.update(req.mq, offset)
        try:
            await store.persist(req.mq)
        except Exception as exc:  # noqa: BLE001 - the next periodic commit carries it too
            log.warning("committing the corrected offset of %s failed: %s", req.mq, exc)
