"""Send: one message or one batch into a queue, in one append, answered when it is safe.

One operation for SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE over remoting
and SendMessage over gRPC. The gate picks the queue (or refuses); the `MessageWriter`
parks delay and half messages and fills what the store indexes; the store appends
once. Under SYNC_FLUSH a sender that waits is answered after the fsync that covers
its message (group commit), under SYNC_MASTER after a slave's acknowledgement: the
operation returns a `LateAnswer` the acknowledgement's callback gives (no future or
task per send), or an awaitable after the fsync.

The caller hands ``answer``: how its door encodes what was stored (a `Sent`). The
operation calls it once, at the moment the send is settled, so a late answer is one
object and the door's encoding is done where the bytes leave.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

from skiff.broker.compaction import is_compacted, keys_refusal
from skiff.broker.config import BrokerConfig
from skiff.broker.dedup import Deduplication
from skiff.broker.ha.role import Role
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.broker.redirect import REDIRECT_PROPERTIES
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.broker.writer import MessageWriter, batch_refusal
from skiff.common.errors import DecodeError
from skiff.common.names import is_retry_topic
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import pack_host
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.bodies.topic_attributes import TopicMessageType, message_type
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.codes import ResponseCode
from skiff.protocol.message_codec import split_batch_columns
from skiff.store import MessageInput, MessageStore, PutResult, PutStatus
from skiff.transport.late import LateAnswer

T = TypeVar("T")

_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_PUT_OK = PutStatus.PUT_OK
"""Named once: each ``PutStatus.PUT_OK`` on the send path runs the enum metaclass's `__getattr__` hook."""
CLIENT_FLAGS = ~int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
"""A sender's sysFlag less the host-length bits: the store sets those from the real addresses,
and a bit that disagreed with the bytes written would make the record unreadable."""
DEFAULT_TEMPLATE = "TBW102"
_REPLICA_REASONS = {
    PutStatus.FLUSH_SLAVE_TIMEOUT: "stored on the master; no slave acknowledged it within slaveTimeout",
    PutStatus.SLAVE_NOT_AVAILABLE: "stored on the master; no slave is connected, or it is haSlaveFallbehindMax behind",
}


Targeted = tuple[str, int, str | None, int]
"""A send's topic, queue id, template topic and its queue count: what the gate's answer depends on."""


class SendRequest(NamedTuple):
    """One send as the doors hand it over: a NamedTuple, which costs a quarter of a frozen
    dataclass to make (0.5 against 2.2 µs, timeit) on a path run once per request."""

    topic: str
    queue_id: int
    """The queue; negative: any write queue."""
    body: bytes
    properties: str = ""
    """RocketMQ's property text (``name\\x01value\\x02``…), the form the store keeps."""
    flag: int = 0
    sys_flag: int = 0
    born_ms: int = 0
    born_host: bytes = b""
    reconsume_times: int = 0
    batch: bool = False
    """The body is RocketMQ's batch body (messages back to back, zlib'd whole when COMPRESSED)."""
    template: str | None = DEFAULT_TEMPLATE
    """The topic a missing topic is made from; None: never made here (the gRPC door, as the proxy)."""
    template_queue_nums: int = 4


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message of a multi-message send whose properties are already a mapping (gRPC)."""

    body: bytes
    properties: Mapping[str, str]
    born_ms: int


class Sent(NamedTuple):
    """What the store made of a send: its result (status, offsets, ids) and the queue.
    ``member``: which message of a coalesced append this send is (None: the whole append is
    this send's, one message or a batch), so a run's one result serves each of its sends.
    A NamedTuple: one is made per send (a third of a frozen dataclass's cost)."""

    result: PutResult
    queue_id: int
    member: int | None = None

    @property
    def msg_ids(self) -> tuple[str, ...]:
        ids = self.result.offset_msg_ids
        return ids if self.member is None else ids[self.member:self.member + 1]

    @property
    def queue_offset(self) -> int:
        return self.result.queue_offset + (self.member or 0)


class SyncReplicas(Protocol):
    def replicate(self, end: int, done: Callable[[bool], None]) -> PutStatus | None: ...


@functools.lru_cache(maxsize=4096)
def born_host(peer: tuple[str, int]) -> bytes:
    """A client's address packed as a record's BORNHOST (cached: one per connection)."""
    return pack_host(peer[0], peer[1])


class SendOperation:
    def __init__(self, config: BrokerConfig, role: Role, store: MessageStore, topics: TopicConfigManager,
                 gate: Gate, writer: MessageWriter, stats: BrokerStats | None = None,
                 sync_replicas: SyncReplicas | None = None) -> None:
        """``sync_replicas``: the master's HA service, which SYNC_MASTER sends wait on."""
        self.config = config
        self.role = role
        self.store = store
        self.topics = topics
        self.gate = gate
        self.writer = writer
        self.stats = stats
        self.sync_replicas = sync_replicas
        self.dedup = Deduplication(store, topics, writer.clock.now_ms, lambda: role.epoch)
        """Topics' duplicate windows over UNIQ_KEY (``dedup.window.ms``), checked in `append`."""
        self._flush_waiters: dict[concurrent.futures.Future[PutStatus], list[FlushWaiter]] = {}
        """SYNC_FLUSH answers by the flush future they wait for (one per append)."""
        self._flushes_done: collections.deque[concurrent.futures.Future[PutStatus]] = collections.deque()
        """Flush futures resolved by the flusher's thread, not yet answered in the loop."""
        self._drain_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def send(self, req: SendRequest, answer: Callable[[Sent], T]) -> T | Refusal | LateAnswer[T] | Awaitable[T]:
        if req.batch:
            return self._send_batch(req, answer)
        prepared = self.prepare(req)
        if isinstance(prepared, Refusal):
            return prepared
        _, queue_id, row, wait = prepared
        return self.append(None, queue_id, [row], len(req.body), wait, answer)  # its keys are checked

    def prepare(self, req: SendRequest, known: dict[Targeted, tuple[TopicConfig, int] | Refusal] | None = None
                ) -> tuple[TopicConfig, int, MessageInput, bool] | Refusal:
        """A single message's topic, queue, store row and whether its sender waits for the
        flush (WAIT), or why it is refused: everything but the append. ``known``: the gate's
        answers for the sends handled in this same loop step, by topic, queue and template (the
        gate's state cannot change between them; a send to any queue asks it each time)."""
        if known is None or req.queue_id < 0:
            target = self.target(req.topic, req.queue_id, req.template, req.template_queue_nums)
        else:
            key = (req.topic, req.queue_id, req.template, req.template_queue_nums)
            target = known.get(key) or known.setdefault(
                key, self.target(req.topic, req.queue_id, req.template, req.template_queue_nums))
        if isinstance(target, Refusal):
            return target
        tc, queue_id = target
        props = decode_properties(req.properties) if req.properties else {}
        if Prop.PRIORITY in props:
            queue_id = priority_queue(tc, props[Prop.PRIORITY], queue_id)
        row = self.writer.message(
            req.topic, queue_id, req.body, props, req.properties.encode() if req.properties else b"", req.flag,
            req.sys_flag & CLIENT_FLAGS, req.born_ms, req.born_host, req.reconsume_times)
        if isinstance(row, str):
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, row)
        why = keys_refusal(tc.topic_name, [row]) if is_compacted(tc) else None
        if why is not None:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, why)
        return tc, queue_id, row, props.get(Prop.WAIT) != "false"

    def _send_batch(self, req: SendRequest, answer: Callable[[Sent], T]) -> T | Refusal | LateAnswer[T] | Awaitable[T]:
        target = self.target(req.topic, req.queue_id, req.template, req.template_queue_nums)
        if isinstance(target, Refusal):
            return target
        tc, queue_id = target
        rows, props = self._batch(req, queue_id)
        if isinstance(rows, str):
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, rows)
        return self.append(tc, queue_id, rows, len(req.body), props.get(Prop.WAIT) != "false", answer)

    def send_messages(self, topic: str, messages: Sequence[Outgoing], host: bytes,
                  answer: Callable[[Sent], T]) -> T | Refusal | LateAnswer[T] | Awaitable[T] | None:
        """Several plain messages of one topic in one append (consecutive offsets of one queue),
        or None when one of them needs a path of its own (a delay, a transaction, a refused
        property): then the caller sends each alone."""
        target = self.target(topic, -1, None, 0)
        if isinstance(target, Refusal):
            return target
        tc, queue_id = target
        if self.dedup.covers(topic):
            return None  # a duplicate's answer is its own
        rows = [self.writer.message(topic, queue_id, m.body, m.properties, None, 0, 0, m.born_ms, host)
                for m in messages]
        if any(isinstance(r, str) for r in rows):
            return None
        body_bytes = sum(len(m.body) for m in messages)
        return self.append(tc, queue_id, rows, body_bytes, True, answer)  # type: ignore[arg-type]  # no str: checked

    def target(self, topic: str, queue_id: int, template: str | None,
               template_queue_nums: int) -> tuple[TopicConfig, int] | Refusal:
        """The topic and queue a send goes to, or the gate's refusal."""
        create = None if template is None else lambda: self._create(topic, template, template_queue_nums)
        return self.gate.writable(topic, queue_id, create, template or "")

    def append(self, tc: TopicConfig | None, queue_id: int, rows: list[MessageInput], body_bytes: int, wait: bool,
               answer: Callable[[Sent], T]) -> T | Refusal | LateAnswer[T] | Awaitable[T]:
        """Append ``rows`` in one write, then `settle`. ``tc``: the topic sent to, whose
        compaction needs keys (None when they were checked, or for the broker's own re-sends)."""
        why = keys_refusal(tc.topic_name, rows) if tc is not None and is_compacted(tc) else None
        if why is not None:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, why)
        window = self.dedup.window(rows[0].topic)
        if window is not None:  # only what the topic did not store within the window is appended
            return self.settle(Sent(*self.dedup.append(window, queue_id, rows, body_bytes, self.put)), wait, answer)
        return self.settle(Sent(self.put(rows, body_bytes), queue_id), wait, answer)

    def put(self, rows: list[MessageInput], body_bytes: int) -> PutResult:
        """The store's append of ``rows`` (one topic and queue), counted in the stats."""
        result = self.store.put_messages(rows)
        if self.stats is not None and result.status is _PUT_OK:
            self.stats.stored(rows[0].topic, result.message_count, body_bytes)
        return result

    def settle(self, sent: Sent, wait: bool, answer: Callable[[Sent], T]) -> T | LateAnswer[T] | Awaitable[T]:
        """The answer now, or when it is safe: under SYNC_FLUSH / SYNC_MASTER a ``wait``ing
        sender is answered once the fsync / a slave covers everything its append wrote."""
        result = sent.result
        if not wait or not result.ok:
            return answer(sent)
        replicas = self.sync_replicas if self.role.is_sync_master else None
        if replicas is None:
            return answer(sent) if result.flushed is None else self._when_flushed(sent, answer)
        end = result.physical_offset + result.wrote_bytes
        if result.flushed is None:  # ASYNC_FLUSH under SYNC_MASTER: one late answer, no future
            late = ReplicatedAnswer(sent, answer)
            at_once = replicas.replicate(end, late)
            return late if at_once is None else answer(replicated(sent, at_once))
        acked: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def settle(ok: bool) -> None:
            if not acked.done():
                acked.set_result(ok)
        at_once = replicas.replicate(end, settle)
        return self._after_flush(sent, acked if at_once is None else at_once, answer)

    def _when_flushed(self, sent: Sent, answer: Callable[[Sent], T]) -> LateAnswer[T]:
        """SYNC_FLUSH group commit: a late answer given when the fsync covering ``sent`` is done.
        The sends of one append share its flush future, and one callback from the flusher's
        thread answers all of them in one loop step (no task, no future per send)."""
        late = FlushedAnswer(sent, answer)
        self._wait_flush(sent.result, late)
        return late

    def when_run_flushed(self, result: PutResult, queue_id: int, members: list[int],
                         answer_run: Callable[[list[int], PutResult, int, list[typing.Any]], None],
                         answers: Callable[[int], Callable[[Sent], T]]) -> list[LateAnswer[T]]:
        """`_when_flushed` for every send of a stored run at once (all waiting for the flush):
        one waiter whose callback encodes all their answers in one ``answer_run`` call."""
        run = FlushedRun(result, queue_id, members, answer_run, answers)
        self._wait_flush(result, run)
        return run.lates

    def _wait_flush(self, result: PutResult, waiter: FlushWaiter) -> None:
        future = result.flushed
        assert future is not None
        waiting = self._flush_waiters.get(future)
        if waiting is None:
            waiting = self._flush_waiters[future] = []
            self._loop = asyncio.get_running_loop()
            future.add_done_callback(self._flush_done)
        waiting.append(waiter)

    def _flush_done(self, future: concurrent.futures.Future[PutStatus]) -> None:
        """The flusher's thread resolved ``future``. One fsync resolves the futures of every
        append it covers (one per read of single sends): they are queued, and one wake-up of
        the loop answers all of them (`_drain_flushes`), not a ``call_soon_threadsafe`` each."""
        self._flushes_done.append(future)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._drain_flushes)

    def _drain_flushes(self) -> None:
        self._drain_scheduled = False  # before draining: a future queued from now on schedules again
        done = self._flushes_done
        while done:
            self._flushed(done.popleft())

    def _flushed(self, future: concurrent.futures.Future[PutStatus]) -> None:
        status = PutStatus.FLUSH_DISK_TIMEOUT if future.cancelled() else future.result()
        for late in self._flush_waiters.pop(future, ()):
            late.settle(status)

    async def _after_flush(self, sent: Sent, acked: PutStatus | asyncio.Future[bool] | None,
                           answer: Callable[[Sent], T]) -> T:
        """The answer once the fsync (SYNC_FLUSH) and a slave (SYNC_MASTER) have the message;
        a replica failure wins over a flush failure, as in RocketMQ. The message is stored
        here either way, so the answer carries the send result."""
        result = sent.result
        flushed = PutStatus.PUT_OK if result.flushed is None else await asyncio.wrap_future(result.flushed)
        if isinstance(acked, asyncio.Future):
            acked = PutStatus.PUT_OK if await acked else PutStatus.FLUSH_SLAVE_TIMEOUT
        if acked is not None and acked is not PutStatus.PUT_OK:
            return answer(replicated(sent, acked))
        return answer(flush_failed(sent, flushed))

    def _create(self, topic: str, template: str, queue_nums: int) -> TopicConfig | None:
        if is_retry_topic(topic):
            return self.topics.find_or_create(topic, 1, READ_WRITE)
        return self.topics.create_from_template(topic, template, queue_nums, 0)

    def _batch(self, req: SendRequest, queue_id: int) -> tuple[list[MessageInput] | str, dict[str, str]]:
        outer = decode_properties(req.properties) if req.properties else {}
        if is_retry_topic(req.topic):
            return f"a batch cannot be sent to the retry topic {req.topic}", outer
        try:
            records = split_batch_columns(req.body, compressed=bool(req.sys_flag & _COMPRESSED))
        except DecodeError as exc:
            return f"the batch body does not decode: {exc}", outer
        if not REDIRECT_PROPERTIES.isdisjoint(outer):
            return batch_refusal(outer), outer
        flags = req.sys_flag & CLIENT_FLAGS & ~_COMPRESSED
        return self.writer.batch(req.topic, queue_id, records, flags, req.born_ms, req.born_host,
                                 req.reconsume_times), outer


class FlushedAnswer(LateAnswer[T]):
    """A SYNC_FLUSH send's answer, given once the fsync that covers it is done (`settle`)."""

    __slots__ = ("sent", "answer")

    def __init__(self, sent: Sent, answer: Callable[[Sent], T]) -> None:
        super().__init__()
        self.sent, self.answer = sent, answer

    def settle(self, status: PutStatus) -> None:
        self.give(self.answer(flush_failed(self.sent, status)))


class FlushedRun(Generic[T]):
    """The SYNC_FLUSH answers of one stored run of single sends (`when_run_flushed`): one late
    answer per send, all given when the fsync is done, encoded together (``answer_run``, which
    writes each send's answer at its index of the list it is given); after a late fsync each
    is answered alone as `FlushedAnswer` would be (FLUSH_DISK_TIMEOUT, with its result)."""

    __slots__ = ("result", "queue_id", "members", "answer_run", "answers", "lates")

    def __init__(self, result: PutResult, queue_id: int, members: list[int],
                 answer_run: Callable[[list[int], PutResult, int, list[typing.Any]], None],
                 answers: Callable[[int], Callable[[Sent], T]]) -> None:
        self.result, self.queue_id, self.members = result, queue_id, members
        self.answer_run, self.answers = answer_run, answers
        self.lates: list[LateAnswer[T]] = [LateAnswer() for _ in members]

    def settle(self, status: PutStatus) -> None:
        members, lates = self.members, self.lates
        if status is PutStatus.PUT_OK:
            given: list[typing.Any] = [None] * (max(members) + 1)
            self.answer_run(members, self.result, self.queue_id, given)
            for i, late in zip(members, lates):
                late.give(given[i])
            return
        shared = len(members) > 1
        for k, (i, late) in enumerate(zip(members, lates)):
            late.give(self.answers(i)(flush_failed(Sent(self.result, self.queue_id, k if shared else None), status)))


FlushWaiter = typing.Union[FlushedAnswer[typing.Any], FlushedRun[typing.Any]]
"""What waits for a flush future: one send's answer, or a run's."""


def flush_failed(sent: Sent, status: PutStatus) -> Sent:
    """``sent`` as its fsync's outcome leaves it: stored, and FLUSH_DISK_TIMEOUT if the fsync was late."""
    if status is PutStatus.PUT_OK:
        return sent
    return Sent(sent.result._replace(status=status, reason="the fsync did not finish within syncFlushTimeout"),
                sent.queue_id, sent.member)


class ReplicatedAnswer(LateAnswer[T]):
    """A SYNC_MASTER send's answer and its replica waiter in one object: called with True
    once a slave has the message, False after ``slaveTimeout``."""

    __slots__ = ("sent", "answer")

    def __init__(self, sent: Sent, answer: Callable[[Sent], T]) -> None:
        super().__init__()
        self.sent, self.answer = sent, answer

    def __call__(self, ok: bool) -> None:
        self.give(self.answer(self.sent if ok else replicated(self.sent, PutStatus.FLUSH_SLAVE_TIMEOUT)))


def replicated(sent: Sent, status: PutStatus) -> Sent:
    """``sent`` as the replica's outcome leaves it: stored here, and the slave's status if it failed."""
    if status is PutStatus.PUT_OK:
        return sent
    return Sent(sent.result._replace(status=status, reason=_REPLICA_REASONS[status]), sent.queue_id,
                sent.member)


def priority_queue(tc: TopicConfig, priority: str, queue_id: int) -> int:
    """A priority message's queue on a PRIORITY topic, min(priority, writeQueueNums - 1), as
    RocketMQ 5.4's broker places it whatever queue the producer chose (queue n holds priority
    n; POP reads the highest first); on any other topic, or without a number, the queue chosen."""
    if not priority.isdigit() or message_type(tc.attributes) is not TopicMessageType.PRIORITY:
        return queue_id
    return min(int(priority), tc.write_queue_nums - 1)
