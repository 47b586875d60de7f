"""The lite pull consumer's engine (RocketMQ's DefaultLitePullConsumerImpl).

Queues come from a subscription (rebalanced within the group, as a push
consumer's) or from `assign` (fixed, no group coordination). Each held queue
has a pull loop (`PullService`) that fills one buffer of pulled batches; `poll`
hands out one batch at a time, oldest first, skipping paused queues.

Offsets: a queue's *consumed* offset moves when `poll` returns its messages;
its *committed* offset is what the offset store keeps (the broker, or a local
file in broadcasting mode). `commit_sync` commits every consumed offset; with
``auto_commit`` a poll commits, every ``auto_commit_interval_ms``, what earlier
polls returned (never what it is about to return), so a crash re-delivers
rather than loses. `seek` moves a queue's consumed offset and restarts its pull
there; batches pulled before the seek are discarded.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
from dataclasses import dataclass, field

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.consumer_core import ConsumerCore, ConsumerSettings
from skiff.client._impl.consumer_impl import make_offset_store
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client._impl.pull_service import (
    FLOW_BACKOFF_MS,
    LITE_SUSPEND_MS,
    PullRequest,
    PullService,
    PullSettings,
)
from skiff.client._impl.rebalance import Rebalancer
from skiff.client._impl.wakeup import Wakeup
from skiff.client.errors import ClientStateError
from skiff.client.results import MessageSelector
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo
from skiff.protocol.bodies.heartbeat import SUB_ALL, ConsumerData, ConsumeType

log = logging.getLogger(__name__)

PAUSED_HOLD_MS = 1000
"""A paused queue's pull loop checks again this often (resume wakes it at once)."""


class Mode(enum.Enum):
    NONE = "none"
    SUBSCRIBE = "subscribe"
    ASSIGN = "assign"


@dataclass(eq=False, slots=True)
class _Queue:
    """A held queue: its pull state, the offset polls have reached, and its pause."""

    req: PullRequest
    consumed: int
    generation: int = 0
    paused: bool = False
    held_back: list[tuple[int, list[StoredMessage]]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LitePullSettings:
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    pull_threshold_for_all: int = 10_000
    """Messages buffered over all queues before pulls wait for polls (RocketMQ's pullThresholdForAll)."""


class LitePullImpl:
    def __init__(self, group: str, config: ClientConfig, settings: ConsumerSettings, lite: LitePullSettings,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.instance = ClientInstance.get(config)
        self.lite = lite
        store = make_offset_store(self.instance, group, settings)
        self.core = ConsumerCore(group, settings, self.instance, store, ConsumeType.CONSUME_ACTIVELY, clock)
        self.rebalancer = Rebalancer(self.core, self, orderly=False, drop_idle_queues=False)
        self.pulls = PullService(self.core, PullSettings(settings.pull_batch_size, suspend_ms=LITE_SUSPEND_MS,
                                                         commit_offset=False), self)
        self.mode = Mode.NONE
        self.queues: dict[MessageQueue, _Queue] = {}
        self._buffer: collections.deque[tuple[MessageQueue, int, list[StoredMessage]]] = collections.deque()
        self._buffered = 0
        self._arrived = Wakeup()
        self._next_auto_commit = 0.0
        self._commit_tasks: set[asyncio.Task[None]] = set()
        self._wanted: set[MessageQueue] = set()
        self._started = False
        self._stopped = False

    @property
    def group(self) -> str:
        return self.core.group

    # -------------------------------------------------------------- set-up

    def subscribe(self, topic: str, expression: str | MessageSelector) -> None:
        self._set_mode(Mode.SUBSCRIBE)
        self.core.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self.core.subscriptions.pop(topic, None)

    async def assign(self, mqs: list[MessageQueue]) -> None:
        self._set_mode(Mode.ASSIGN)
        wanted = set(mqs)
        for topic in {mq.topic for mq in wanted} - set(self.core.subscriptions):
            self.core.subscribe(topic, SUB_ALL)
        self._wanted = wanted
        for mq in [mq for mq in self.queues if mq not in wanted]:
            await self.queue_removed(mq, self.queues[mq].req.pq)
        if self._started:
            await self._assign_new(wanted)

    def _set_mode(self, mode: Mode) -> None:
        if self.mode not in (Mode.NONE, mode):
            raise ClientStateError(f"this consumer uses {self.mode.value}(); it cannot also {mode.value}()")
        self.mode = mode

    async def _assign_new(self, wanted: set[MessageQueue]) -> None:
        for mq in sorted(wanted - self.queues.keys()):
            offset = await self.rebalancer.compute_pull_from_where(mq)
            await self.queue_added(mq, ProcessQueue(self.core.clock), offset)

    async def start(self) -> None:
        self._started = True
        await self.core.join(self)
        self._next_auto_commit = self._now_s() + self.lite.auto_commit_interval_ms / 1000
        if self.mode is Mode.ASSIGN:
            await self._assign_new(self._wanted)
        else:
            await self.rebalance()

    def _now_s(self) -> float:
        return self.core.clock.monotonic()

    # ---------------------------------------------------- the instance's calls

    def consumer_data(self) -> ConsumerData:
        return self.core.consumer_data()

    async def rebalance(self) -> None:
        if self.mode is Mode.SUBSCRIBE and not self._stopped:
            await self.rebalancer.rebalance()

    async def persist_offsets(self) -> None:
        await self.core.offset_store.persist_all(list(self.queues))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            if mq in self.queues:
                self.seek_unchecked(mq, offset)
            self.core.offset_store.update(mq, offset)
        await self.core.offset_store.persist_all([mq for mq in offsets if mq in self.queues])

    def running_info(self) -> ConsumerRunningInfo:
        store = self.core.offset_store
        return ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name,
                        "messageModel": self.core.settings.message_model.name, "subscriptionType": self.mode.name},
            subscription_set=tuple(sub.to_data() for sub in self.core.subscriptions.values()),
            mq_table={mq: q.req.pq.info(store.read_memory(mq)) for mq, q in self.queues.items()},
            status_table={t: self.core.counters.status() for t in self.core.subscriptions},
        )

    # ------------------------------------------------------ held queues

    async def queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        req = PullRequest(mq, pq, offset, self.core.subscriptions[mq.topic])
        self.queues[mq] = _Queue(req, offset)
        self.pulls.start(req)

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        pq.dropped = True
        self.pulls.stop(mq)
        state = self.queues.pop(mq, None)
        if state is None:
            return
        self._discard_buffered(mq, state)
        store = self.core.offset_store
        if self.lite.auto_commit:
            store.update(mq, state.consumed)
        try:
            await store.persist(mq)
        finally:
            store.remove(mq)

    # ------------------------------------------------------ pull loop calls

    def hold_ms(self, req: PullRequest) -> int:
        state = self.queues.get(req.mq)
        if state is None or state.paused:
            return PAUSED_HOLD_MS
        pq = req.pq
        s = self.core.settings
        if (pq.count > s.pull_threshold_for_queue or pq.size_bytes > s.pull_threshold_size_bytes
                or self._buffered > self.lite.pull_threshold_for_all):
            return FLOW_BACKOFF_MS
        return 0

    def on_found(self, req: PullRequest, msgs: list[StoredMessage]) -> None:
        state = self.queues.get(req.mq)
        if state is None or state.req is not req:
            return
        req.pq.add_run(msgs)  # polled whole and in pull order: held per batch
        self._buffer.append((req.mq, state.generation, msgs))
        self._buffered += len(msgs)
        self._arrived.set()

    def on_no_message(self, req: PullRequest) -> None:
        """Nothing new: the consumed offset may follow (filtered messages leave gaps)."""
        state = self.queues.get(req.mq)
        if state is not None and state.req is req and req.pq.empty:
            state.consumed = max(state.consumed, req.next_offset)

    def _discard_buffered(self, mq: MessageQueue, state: _Queue) -> None:
        """Forget ``mq``'s pulled batches not yet polled (`_take` skips them from now on)."""
        self._buffered -= sum(len(m) for _, m in state.held_back)
        self._buffered -= sum(len(b[2]) for b in self._buffer if b[0] == mq and b[1] == state.generation)
        state.held_back.clear()

    # ------------------------------------------------------------- polling

    async def poll(self, timeout_ms: int) -> list[StoredMessage]:
        self.check_running()
        self._maybe_auto_commit()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            msgs = self._take()
            if msgs is not None:
                return msgs
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self._arrived.wait(remaining)

    def _take(self) -> list[StoredMessage] | None:
        while self._buffer:
            mq, generation, msgs = self._buffer.popleft()
            state = self.queues.get(mq)
            if state is None or state.generation != generation or state.req.pq.dropped:
                continue
            if state.paused:
                state.held_back.append((generation, msgs))
                continue
            self._buffered -= len(msgs)
            offset = state.req.pq.remove_run(msgs)
            if offset >= 0:
                state.consumed = offset
            self.pulls.wake(mq)
            return msgs
        return None

    def _maybe_auto_commit(self) -> None:
        if not self.lite.auto_commit or self._now_s() < self._next_auto_commit:
            return
        self._next_auto_commit = self._now_s() + self.lite.auto_commit_interval_ms / 1000
        self._stage_consumed()
        task = asyncio.get_running_loop().create_task(self._persist_quietly())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)

    def _stage_consumed(self) -> None:
        store = self.core.offset_store
        for mq, state in self.queues.items():
            store.update(mq, state.consumed)

    async def _persist_quietly(self) -> None:
        try:
            await self.core.offset_store.persist_all(list(self.queues))
        except Exception as exc:  # noqa: BLE001 - the next commit tries again
            log.warning("auto-commit of group %s failed: %s", self.group, exc)

    async def commit_sync(self) -> None:
        """Commit every held queue's consumed offset now."""
        self.check_running()
        self._stage_consumed()
        await self.core.offset_store.persist_all(list(self.queues))

    async def commit(self, offsets: dict[MessageQueue, int]) -> None:
        """Commit these offsets (the next message to read, per queue) now."""
        self.check_running()
        store = self.core.offset_store
        for mq, offset in offsets.items():
            store.update(mq, offset)
        for mq in offsets:
            await store.persist(mq)

    # ---------------------------------------------------------------- seeking

    def seek_unchecked(self, mq: MessageQueue, offset: int) -> None:
        state = self.queues[mq]
        self.pulls.stop(mq)
        pq = state.req.pq
        pq.clear()
        self._discard_buffered(mq, state)
        state.generation += 1
        state.consumed = offset
        state.req = PullRequest(mq, pq, offset, state.req.subscription)
        self.pulls.start(state.req)

    def pause(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self.queues:
                self.queues[mq].paused = True

    def resume(self, mqs: list[MessageQueue]) -> None:
        for mq in mqs:
            state = self.queues.get(mq)
            if state is None or not state.paused:
                continue
            state.paused = False
            for generation, msgs in reversed(state.held_back):
                self._buffer.appendleft((mq, generation, msgs))
            state.held_back.clear()
            self._arrived.set()
            self.pulls.wake(mq)

    # ----------------------------------------------------------------- stop

    def check_running(self) -> None:
        if not self._started or self._stopped:
            raise ClientStateError(f"the consumer of group {self.group} is not running")

    async def shutdown(self) -> None:
        if self._stopped or not self._started:
            self._stopped = True
            return
        self._stopped = True
        await self.pulls.stop_all()
        if self._commit_tasks:
            await asyncio.gather(*list(self._commit_tasks), return_exceptions=True)
        for mq in list(self.queues):
            await self.queue_removed(mq, self.queues[mq].req.pq)
        await self.core.leave()
