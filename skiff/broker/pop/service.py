"""PopService: POP consumption over the store, for the remoting processor and the gRPC endpoint.

A pop takes messages of a topic for a group from the queues' cursors (kept in
`PopState`), hides them for an invisible time and hands back a receipt handle
per message (`ExtraInfo`). Non-orderly pops read the group's retry topic for the
topic (``%RETRY%<group>_<topic>``, one queue) too: first with probability
``popFromRetryProbability`` percent, else after the topic's queues when the batch
is not full.

Redelivery (the "revive" loop, every ``popReviveInterval`` ms): an in-flight
message whose invisible time has passed is copied to the retry topic with
reconsumeTimes + 1, or, once it has been retried the group's ``retryMaxTimes``,
to ``%DLQ%<group>``; its in-flight entry is deleted. Orderly batches are not
copied: the blocked queue serves the same messages again, counting deliveries,
and a message delivered more than ``retryMaxTimes + 1`` times goes to the DLQ.

A pop that finds nothing can wait (long polling, up to its poll time) until the
store dispatches to the topic or its retry topic, or an ack frees an orderly
queue. As the pulls `PullHoldService` holds: at most ``maxPopPollingSize`` pops
wait at once (past that a pop is refused, POLLING_FULL), and at shutdown every
waiting pop is released at once and refused ("shutting down") if it still finds
nothing, so clients back off instead of popping again into a closing connection.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations.pull import GONE_LOCALLY, PullRequest
from skiff.broker.pop.state import InFlight, OrderBatch, PopState, QueueKey
from skiff.broker.operations.subscription import record_filter
from skiff.broker.requeue import Retry, requeue
from skiff.broker.topics import TopicConfigManager
from skiff.broker.writer import MessageWriter
from skiff.common.clock import Clock
from skiff.common.errors import SkiffError
from skiff.common.limits import TIER_SETTLE_WAIT_S
from skiff.common.names import pop_retry_topic
from skiff.common.record import PHYSICAL_OFFSET_AT, RECONSUME_TIMES_AT_V4, SYSFLAG_AT, read_head
from skiff.common.sysflag import MessageSysFlag
from skiff.common.service import Periodic
from skiff.filter import ExpressionType, MessageFilter, build_filter
from skiff.protocol.bodies.topic_attributes import TopicMessageType, message_type
from skiff.protocol.headers.pop import NORMAL_TOPIC, ORDERLY_REVIVE_QID, RETRY_TOPIC, ExtraInfo
from skiff.store import GetResult, GetStatus, MessageStore

log = logging.getLogger(__name__)

INIT_MIN = 0
INIT_MAX = 1
_SIZE = struct.Struct(">i")
_EVERY_MESSAGE = build_filter("*", ExpressionType.TAG)
TIER_RETRY_S = 0.05
"""How soon a pop that found its queue's next messages being fetched from the tier looks again."""


class PopQuery(NamedTuple):
    """A checked pop (`skiff.broker.operations.pop` makes it): its filter compiled, orderly
    decided."""


    group: str
    topic: str
    queue_id: int
    """-1: every readable queue of the topic."""
    max_nums: int
    invisible_ms: int
    flt: MessageFilter
    orderly: bool = False
    attempt_id: str = ""
    init_mode: int = INIT_MAX


class Popped(NamedTuple):
    record: memoryview
    topic: str
    """The topic popped: the request's topic, or the group's retry topic for it."""
    queue_id: int
    queue_offset: int
    handle: ExtraInfo
    delivery_attempt: int


class _NotYet(Exception):
    """A popped message's record is only in the tier and is being fetched: ask again later."""


class TierFetching(SkiffError):
    """A dead-letter move gave up waiting (`TIER_SETTLE_WAIT_S`) for the tier to fetch the
    message's record; the message stays in flight and the client may ask again."""

    retriable = True


class PopRefused(SkiffError):
    """A pop that found nothing and may not wait: too many wait already (``full``), or the
    broker is shutting down."""

    retriable = True

    def __init__(self, message: str, *, full: bool) -> None:
        super().__init__(message)
        self.full = full


class PopService:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager, writer: MessageWriter,
                 clock: Clock, store_root: str) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.writer = writer
        self.clock = clock
        self.state = PopState(store_root)
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._polling = 0
        self._closed = False
        self.tier_read: Callable[[PullRequest, MessageFilter, GetResult], GetResult] | None = None
        """Set when the broker has a tier (`skiff.broker.tier.setup`): a read below what is kept
        locally goes there, as a pull's does (docs/tiered-storage.md)."""
        self._tier_fetching = False
        self.first_offset: Callable[[str, int], int] = store.get_min_offset
        """A queue's first offset: the tier's when it reaches back further than the disk."""

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Load the state and listen to dispatches."""
        self.state.load()
        self._loop = asyncio.get_running_loop()
        self.store.add_dispatch_listener(self._dispatched)

    def periodics(self) -> list[Periodic]:
        """The reviver and the state's persistence: a master's, started (fresh) each time
        this broker becomes master."""
        return [Periodic("pop-revive", self.config.pop_revive_interval_ms / 1000.0, self._revive_tick),
                Periodic("pop-persist", self.config.pop_state_persist_interval_ms / 1000.0, self.persist)]

    async def persist(self) -> None:
        data = self.state.snapshot()
        if data is not None:
            await asyncio.to_thread(self.state.write, data)

    # -- pop ------------------------------------------------------------------------

    async def pop(self, req: PopQuery, poll_ms: int) -> list[Popped]:
        """Pop now, or wait up to ``poll_ms`` for something to pop; `PopRefused` when it found
        nothing and may not wait."""
        deadline = self.clock.monotonic() + poll_ms / 1000.0
        found = self.pop_once(req)
        if found or poll_ms <= 0 or self._loop is None:
            return found
        self._admit()
        self._polling += 1
        try:
            while True:
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    return found
                wait = TIER_RETRY_S if self._tier_fetching else 1.0
                await self._wait((req.topic, pop_retry_topic(req.group, req.topic)), min(left, wait))
                found = self.pop_once(req)
                if found:
                    return found
                if self._closed:
                    raise self._shutting_down()
        finally:
            self._polling -= 1

    def _admit(self) -> None:
        """Refuse a pop that would wait past the cap or while the broker shuts down."""
        if self._closed:
            raise self._shutting_down()
        if self._polling >= self.config.max_pop_polling_size:
            raise PopRefused(f"{self._polling} pops are waiting already, the most this broker holds "
                             f"(maxPopPollingSize)", full=True)

    def _shutting_down(self) -> PopRefused:
        return PopRefused(f"the broker {self.config.broker_name} is shutting down", full=False)

    def release(self) -> None:
        """Shutdown: wake every waiting pop (each pops once more, and is refused if it finds
        nothing) and let no pop wait from now on."""
        self._closed = True
        for waiting in list(self._waiters.values()):
            for future in waiting:
                if not future.done():
                    future.set_result(None)

    def pop_once(self, req: PopQuery) -> list[Popped]:
        self._tier_fetching = False
        tc = self.topics.get(req.topic)
        if tc is None:
            return []
        queues = [req.queue_id] if req.queue_id >= 0 else _rotated(tc.read_queue_nums)
        sources = [(req.topic, q, NORMAL_TOPIC) for q in queues]
        if not req.orderly and req.queue_id < 0 and message_type(tc.attributes) is TopicMessageType.PRIORITY:
            sources = self._by_priority(req, tc.read_queue_nums)
        elif not req.orderly:
            retry = pop_retry_topic(req.group, req.topic)
            if self.topics.get(retry) is not None:
                first = random.randrange(100) < self.config.pop_from_retry_probability
                sources = [(retry, 0, RETRY_TOPIC), *sources] if first else [*sources, (retry, 0, RETRY_TOPIC)]
        out: list[Popped] = []
        now = self.clock.now_ms()
        for topic, queue_id, kind in sources:
            if len(out) >= req.max_nums:
                break
            key = (req.group, topic, queue_id)
            if req.orderly:
                out += self._pop_orderly(req, key, kind, now, req.max_nums - len(out))
            else:
                out += self._pop_queue(req, key, kind, now, req.max_nums - len(out))
        return out

    def _by_priority(self, req: PopQuery, queue_nums: int) -> list[tuple[str, int, int]]:
        """A PRIORITY topic's queues from the highest (queue n holds priority n), each after the
        retries of its priority (RocketMQ 5.4 reads retries only to fill a batch, so a retried
        message loses its priority; here it keeps it)."""
        retry = pop_retry_topic(req.group, req.topic)
        rtc = self.topics.get(retry)
        retry_queues = rtc.read_queue_nums if rtc is not None else 0
        sources = []
        for q in reversed(range(queue_nums)):
            if q < retry_queues:
                sources.append((retry, q, RETRY_TOPIC))
            sources.append((req.topic, q, NORMAL_TOPIC))
        return sources

    def rest(self, group: str, topic: str) -> int:
        """Messages of ``topic`` past the group's cursors (the pop response's restNum)."""
        tc = self.topics.get(topic)
        total = 0
        for queue_id in range(tc.read_queue_nums if tc is not None else 0):
            cursor = self.state.cursors.get((group, topic, queue_id))
            if cursor is not None:
                total += max(0, self.store.get_max_offset(topic, queue_id) - cursor)
        return total

    def progress(self, group: str, topic: str, queue_id: int) -> tuple[int, int] | None:
        """Where ``group`` pops ``topic``'s queue next and how many of its messages are in
        flight (popped, not acknowledged); None when the group never popped it."""
        key = (group, topic, queue_id)
        cursor = self.state.cursors.get(key)
        if cursor is None:
            return None
        batch = self.state.batches.get(key)
        in_flight = len(self.state.in_flight.get(key, ())) + (len(batch.pending) if batch is not None else 0)
        return (batch.next_offset if batch is not None else cursor), in_flight

    def consumed(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, queue id, offset consumed up to: the lowest in flight, else the cursor)
        of every queue a group pops, acknowledged or not yet."""
        out = []
        for key in self.state.cursors:
            lowest = self.state.lowest_unacked(key)
            if lowest is not None:
                out.append((*key, lowest))
        return out

    def _pop_queue(self, req: PopQuery, key: QueueKey, kind: int, now: int, n: int) -> list[Popped]:
        records, offsets, next_offset = self._read(req, key, n)
        if next_offset is None:
            return []
        self.state.cursors[key] = next_offset
        self.state.changed()
        out = []
        start = offsets[0] if offsets else next_offset
        invisible_ms, broker_name, topic, queue_id = req.invisible_ms, self.config.broker_name, key[1], key[2]
        in_flight = self.state.in_flight.setdefault(key, {})  # `PopState.add` of each, inlined: once per message
        for record, offset in zip(records, offsets):
            clo, reconsumed = _placed(record)
            in_flight[offset] = InFlight(now, invisible_ms, clo)
            handle = ExtraInfo(start, now, invisible_ms, 0, kind, broker_name, queue_id, offset, clo)
            out.append(Popped(record, topic, queue_id, offset, handle, reconsumed + 1))
        if not in_flight:
            del self.state.in_flight[key]  # nothing popped: no empty table left behind
        return out

    def _pop_orderly(self, req: PopQuery, key: QueueKey, kind: int, now: int, n: int) -> list[Popped]:
        batch = self.state.batches.get(key)
        if batch is not None:
            if batch.blocked(now, req.attempt_id):
                return []
            again = self._serve_again(req, key, batch, kind, now)
            if again or key in self.state.batches:
                return again
        records, offsets, next_offset = self._read(req, key, n)
        if next_offset is None:
            return []
        if not offsets:
            self.state.cursors[key] = next_offset
            self.state.changed()
            return []
        batch = self.state.batches[key] = OrderBatch(req.attempt_id, next_offset)
        out = []
        for record, offset in zip(records, offsets):
            batch.pending[offset] = InFlight(now, req.invisible_ms, read_head(record).physical_offset)
            batch.counts[offset] = 1
            out.append(self._orderly_popped(record, key, kind, offsets[0], offset, batch.pending[offset], 1))
        self.state.changed()
        return out

    def _serve_again(self, req: PopQuery, key: QueueKey, batch: OrderBatch, kind: int, now: int) -> list[Popped]:
        """The batch's un-acknowledged messages once more (the same attempt, or after their
        invisible time); those past their last attempt go to the DLQ instead."""
        out = []
        same_attempt = bool(req.attempt_id) and req.attempt_id == batch.attempt_id
        start = min(batch.pending)
        try:
            records = {offset: self._stored(key, offset, entry.commit_log_offset)
                       for offset, entry in batch.pending.items()}
        except _NotYet:
            return []
        for offset in sorted(batch.pending):
            entry = batch.pending[offset]
            if not same_attempt:
                batch.counts[offset] = batch.counts.get(offset, 1) + 1
            record = records[offset]
            if record is None or batch.counts[offset] > self.groups.retry_max_times(req.group) + 1:
                if record is not None:
                    self._dead_letter(req.group, record)
                self.state.ack_orderly(key, offset)
                continue
            batch.pending[offset] = InFlight(now, req.invisible_ms, entry.commit_log_offset)
            out.append(self._orderly_popped(memoryview(record), key, kind, start, offset, batch.pending[offset],
                                            batch.counts[offset]))
        batch.attempt_id = req.attempt_id
        self.state.changed()
        return out

    def _orderly_popped(self, record: memoryview, key: QueueKey, kind: int, start: int, offset: int,
                        entry: InFlight, count: int) -> Popped:
        handle = ExtraInfo(start, entry.pop_time, entry.invisible_ms, ORDERLY_REVIVE_QID, kind,
                           self.config.broker_name, key[2], offset, entry.commit_log_offset)
        return Popped(record, key[1], key[2], offset, handle, count)

    def _read(self, req: PopQuery, key: QueueKey, n: int) -> tuple[list[memoryview], list[int], int | None]:
        """Up to ``n`` matching records from the queue's cursor, their offsets and the next
        cursor (None when there is nothing new to look at)."""
        _, topic, queue_id = key
        start = self._cursor(req, key)
        flt = req.flt
        result = self.store.get_messages(topic, queue_id, start, n, tag_codes=flt.tag_codes,
                                         record_filter=record_filter(flt))
        if self.tier_read is not None and result.status in GONE_LOCALLY:
            tiered = self.tier_read(PullRequest(req.group, topic, queue_id, start, n), flt, result)
            if tiered is not result and tiered.status is GetStatus.MESSAGE_WAS_REMOVING:
                self._tier_fetching = True  # the tier is fetching it: pop again soon
                return [], [], None
            result = tiered
        if result.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
            self.state.cursors[key] = result.min_offset if result.status is GetStatus.OFFSET_TOO_SMALL \
                else result.max_offset
            return [], [], None
        if result.status is GetStatus.FOUND:
            return _split(result.buffers), list(result.queue_offsets), result.next_begin_offset
        if result.status is GetStatus.NO_MATCHED_MESSAGE and result.next_begin_offset > start:
            return [], [], result.next_begin_offset
        return [], [], None

    def _cursor(self, req: PopQuery, key: QueueKey) -> int:
        cursor = self.state.cursors.get(key)
        if cursor is not None:
            return cursor
        committed = self.offsets.query(key[0], key[1], key[2])
        if committed is not None:
            return committed
        low = self.first_offset(key[1], key[2])
        if req.init_mode == INIT_MIN or low == 0 or key[1] != req.topic:
            return low
        return self.store.get_max_offset(key[1], key[2])

    # -- ack, change, dead letters -------------------------------------------------------

    def real_key(self, group: str, topic: str, handle: ExtraInfo) -> QueueKey:
        """The queue a handle's message was popped from; ``topic`` may name the original topic
        (as gRPC clients do) or, for a retried message, the retry topic itself (as the 4.x
        remoting client's acks do)."""
        retried = handle.topic_type == RETRY_TOPIC and not topic.startswith(pop_retry_topic(group, ""))
        real = pop_retry_topic(group, topic) if retried else topic
        return (group, real, handle.queue_id)

    def ack(self, group: str, topic: str, handle: ExtraInfo) -> bool:
        """Remove the message for good; False when the handle names nothing in flight (it was
        acknowledged already, redelivered, or given a new handle)."""
        key = self.real_key(group, topic, handle)
        if self.state.find(key, handle.queue_offset, handle.pop_time, handle.orderly) is None:
            return False
        if handle.orderly:
            if self.state.ack_orderly(key, handle.queue_offset):
                self._wake(key[1])
        else:
            self.state.remove(key, handle.queue_offset)
        self._commit(key)
        return True

    def change_invisible(self, group: str, topic: str, handle: ExtraInfo, invisible_ms: int) -> ExtraInfo | None:
        """Hide the message for ``invisible_ms`` from now; its new handle, or None as `ack` says."""
        key = self.real_key(group, topic, handle)
        entry = self.state.find(key, handle.queue_offset, handle.pop_time, handle.orderly)
        if entry is None:
            return None
        entry.pop_time = self.clock.now_ms()
        entry.invisible_ms = invisible_ms
        self.state.changed()
        return handle._replace(pop_time=entry.pop_time, invisible_time=invisible_ms)

    async def dead_letter(self, group: str, topic: str, handle: ExtraInfo) -> bool:
        """Move the message to ``%DLQ%<group>`` now and acknowledge it; False as `ack` says. A
        message whose record only the tier holds waits for the tier's fetch (looking again every
        `TIER_RETRY_S`, at most `TIER_SETTLE_WAIT_S`: past that `TierFetching`, and the client
        asks again)."""
        key = self.real_key(group, topic, handle)
        for _ in range(max(1, round(TIER_SETTLE_WAIT_S / TIER_RETRY_S))):
            entry = self.state.find(key, handle.queue_offset, handle.pop_time, handle.orderly)
            if entry is None:  # settled meanwhile (acknowledged, redelivered)
                return False
            try:
                record = self._stored(key, handle.queue_offset, entry.commit_log_offset)
            except _NotYet:
                await asyncio.sleep(TIER_RETRY_S)
                continue
            if record is None:
                return False
            self._dead_letter(group, record)
            return self.ack(group, topic, handle)
        raise TierFetching(f"the message's record is being fetched from the tier (more than {TIER_SETTLE_WAIT_S} s "
                           f"so far); it is still in flight: ask again")

    def _dead_letter(self, group: str, record: bytes) -> None:
        self._put(requeue(self.writer, self.topics, record, group, None, 0))

    def _commit(self, key: QueueKey) -> None:
        consumed = self.state.lowest_unacked(key)
        if consumed is not None:
            self.offsets.commit(key[0], key[1], key[2], consumed)

    # -- revive --------------------------------------------------------------------------

    def _revive_tick(self) -> None:
        self.revive()

    def revive(self) -> int:
        """Copy every due in-flight message to its retry topic (or the DLQ); how many moved."""
        moved = 0
        for key, offset, entry in self.state.due(self.clock.now_ms()):
            group, topic, queue_id = key
            try:
                record = self._stored(key, offset, entry.commit_log_offset)
            except _NotYet:  # in the tier, being fetched: redelivered at a later tick
                continue
            if record is not None and not self._redeliver(group, topic, queue_id, record):
                continue
            self.state.remove(key, offset)
            self._commit(key)
            moved += 1
        return moved

    def _redeliver(self, group: str, topic: str, queue_id: int, record: bytes) -> bool:
        """To the group's retry topic for ``topic`` (popped from that retry topic: the same), or
        to the DLQ past the group's retries; False when the copy could not be stored. A PRIORITY
        topic's retry topic has its queues, and the copy keeps its priority's queue."""
        prefix = pop_retry_topic(group, "")
        retry = topic if topic.startswith(prefix) else pop_retry_topic(group, topic)
        tc = self.topics.get(topic)
        where = Retry(retry)
        if tc is not None and (topic == retry or message_type(tc.attributes) is TopicMessageType.PRIORITY):
            where = Retry(retry, tc.read_queue_nums, queue_id=queue_id)
        return self._put(requeue(self.writer, self.topics, record, group, where,
                                 self.groups.retry_max_times(group)))

    def _stored(self, key: QueueKey, offset: int, commit_log_offset: int) -> bytes | None:
        """A popped message's stored record: from the CommitLog, else (retention deleted it
        there) from the tier; None when neither has it; `_NotYet` while the tier fetches it."""
        record = self.store.read_record(commit_log_offset)
        if record is not None or self.tier_read is None:
            return record
        _, topic, queue_id = key
        local = GetResult(GetStatus.OFFSET_TOO_SMALL, offset, self.store.get_min_offset(topic, queue_id),
                          self.store.get_max_offset(topic, queue_id))
        found = self.tier_read(PullRequest(key[0], topic, queue_id, offset, 1), _EVERY_MESSAGE, local)
        if found.status is GetStatus.MESSAGE_WAS_REMOVING:
            raise _NotYet
        if not found.found or found.queue_offsets[0] != offset:
            return None
        return bytes(_split(found.buffers)[0])

    def _put(self, made: object) -> bool:
        if isinstance(made, str):
            log.error("POP could not re-queue a message: %s", made)
            return False
        result = self.store.put_message(made)  # type: ignore[arg-type]
        if not result.ok:
            log.warning("POP could not re-queue a message: %s %s", result.status.name, result.reason)
        return result.ok

    # -- long polling --------------------------------------------------------------------

    async def _wait(self, topics: Sequence[str], timeout_s: float) -> None:
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for topic in topics:
                waiting = self._waiters.get(topic)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiters[topic]

    def _dispatched(self, touched: Sequence[tuple[str, int, int]]) -> None:
        """The store's dispatch listener (any thread): wake pops waiting on those topics."""
        if not self._waiters or self._loop is None:
            return
        topics = {t for t, _, _ in touched}
        try:
            self._loop.call_soon_threadsafe(self._wake_all, topics)
        except RuntimeError:  # the loop is closed: shutting down
            pass

    def _wake_all(self, topics: set[str]) -> None:
        for topic in topics:
            self._wake(topic)

    def _wake(self, topic: str) -> None:
        for future in self._waiters.get(topic, ()):
            if not future.done():
                future.set_result(None)


def _rotated(n: int) -> list[int]:
    start = random.randrange(n) if n > 0 else 0
    return [(start + i) % n for i in range(n)]


_CLO_SYSFLAG = struct.Struct(">qi")
assert SYSFLAG_AT == PHYSICAL_OFFSET_AT + 8
_HOST_V6 = int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)


def _placed(record: memoryview) -> tuple[int, int]:
    """A popped record's CommitLog offset and reconsume times: two reads where the record has
    IPv4 hosts, not `read_head`'s whole head (~0.2 against ~1.2 µs, once per popped message)."""
    if len(record) >= RECONSUME_TIMES_AT_V4 + 4:
        clo, sys_flag = _CLO_SYSFLAG.unpack_from(record, PHYSICAL_OFFSET_AT)
        if not sys_flag & _HOST_V6:
            return clo, _SIZE.unpack_from(record, RECONSUME_TIMES_AT_V4)[0]
    head = read_head(record)
    return head.physical_offset, head.reconsume_times


def _split(buffers: list[memoryview]) -> list[memoryview]:
    """The records in a read's slices (each slice holds records back to back)."""
    out = []
    for buf in buffers:
        pos = 0
        while pos < len(buf):
            size = _SIZE.unpack_from(buf, pos)[0]
            out.append(buf[pos:pos + size])
            pos += size
    return out

