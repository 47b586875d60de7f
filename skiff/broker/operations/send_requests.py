"""The single-message sends that arrive together, appended together.

A producer with 64 sends in flight (or many producers) delivers many SEND_MESSAGE /
SEND_MESSAGE_V2 requests in one read. Each is checked and turned into its store row
on its own (`SendOperation.prepare`), then the rows bound for one queue are appended
in one write and dispatched once; under SYNC_FLUSH they share one fsync, under
SYNC_MASTER one replica wait. Each request is still answered with its own queue
offset and message id, and nothing waits for more requests to come: what one read
brought is the batch, so a lone request goes through alone.

Order: requests for one queue are appended in the order they arrived. A request
that cannot join a queue's run (a batch body, a half message, whose queue offsets
the store assigns apart) appends the runs gathered so far first, so no queue sees
its requests reordered.

A run whose append the store refuses for one message's sake (MESSAGE_ILLEGAL,
PROPERTIES_SIZE_EXCEEDED: a body or properties over the limits) is appended again
request by request, so each gets its own answer and the good ones are stored; any
other failure (a full disk, a shutdown) is every request's answer.

Plain sends (`send_plain`): a read whose sends are all single messages to a named queue
with no property that takes a message elsewhere (`NOT_PLAIN`: a delay, a transaction, the
timer's mark, a priority) and no prepared-transaction flag arrives here already as store
rows grouped by queue (the remoting door's compiled `plain_sends` builds them from the
frames in one pass): no per-request Python until the answers, which `answer_run` encodes
for a whole stored run at once. It gives what `send_requests` gives for the same read:
the gate asked once per queue in arrival order, the runs appended in the order their
queues first appeared, each request answered with its own offset and id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from skiff.broker.compaction import is_compacted, keys_refusal
from skiff.broker.dedup import DedupWindow
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.send import SendOperation, SendRequest, Sent, Targeted
from skiff.broker.redirect import REDIRECT_PROPERTIES
from skiff.common.limits import BATCH_MAX_MESSAGES, COALESCED_MAX_BYTES
from skiff.common.properties import Prop
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.codes import ResponseCode
from skiff.store import MessageInput, PutResult, PutStatus
from skiff.store.dispatcher import NOT_CONSUMABLE
from skiff.transport.late import LateAnswer

T = TypeVar("T")

_PUT_OK = PutStatus.PUT_OK  # named once (an enum member through its class costs a metaclass hook)
_ONE_MESSAGE_FAILED = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})

NOT_PLAIN: tuple[str, ...] = tuple(sorted(REDIRECT_PROPERTIES | {Prop.TIMER_ID, Prop.PRIORITY}))
"""Properties that keep a single send off the plain path: the writer parks or strips them
(`MessageWriter.message`), or the queue follows them (`priority_queue`)."""
PLAIN_INDEXED: tuple[str, ...] = (Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY, Prop.WAIT)
"""What a plain send's row needs of its properties: the three the store indexes, then WAIT."""

PlainGroup = list[Any]
"""One queue's plain sends: [template, template queue count, request indices, rows, body bytes]."""
PlainSends = tuple[dict[tuple[str, int], PlainGroup], list[MessageInput], list[bool]]
"""A read of plain sends: its groups by (topic, queue id) in first-arrival order, every
request's row and whether its sender waits for the flush (WAIT)."""


@dataclass(slots=True)
class _Member:
    index: int
    row: MessageInput
    queue_id: int
    wait: bool
    body_bytes: int


class _Runs:
    """The rows gathered per queue, in arrival order, until they are appended."""

    def __init__(self) -> None:
        self.by_queue: dict[tuple[str, int], list[_Member]] = {}

    def add(self, member: _Member) -> None:
        self.by_queue.setdefault((member.row.topic, member.row.queue_id), []).append(member)


def send_requests(op: SendOperation, requests: Sequence[SendRequest],
                  answers: Sequence[Callable[[Sent], T]]) -> list[T | Refusal | LateAnswer[T] | Awaitable[T]]:
    """Each request's outcome, as `SendOperation.send` would give it, in their order."""
    out: list[T | Refusal | LateAnswer[T] | Awaitable[T] | None] = [None] * len(requests)
    runs = _Runs()
    known: dict[Targeted, tuple[TopicConfig, int] | Refusal] = {}  # the gate's answers in this call
    for i, req in enumerate(requests):
        if req.batch:
            _append_runs(op, runs, answers, out)
            out[i] = op.send(req, answers[i])
            continue
        prepared = op.prepare(req, known)
        if isinstance(prepared, Refusal):
            out[i] = prepared
            continue
        _, queue_id, row, wait = prepared
        if row.sys_flag & NOT_CONSUMABLE:
            _append_runs(op, runs, answers, out)
            out[i] = op.append(None, queue_id, [row], len(req.body), wait, answers[i])
            continue
        runs.add(_Member(i, row, queue_id, wait, len(req.body)))
    _append_runs(op, runs, answers, out)
    filled = [o for o in out if o is not None]
    assert len(filled) == len(out), "a request was left without an outcome"
    return filled


def _append_runs(op: SendOperation, runs: _Runs, answers: Sequence[Callable[[Sent], T]],
                 out: list[T | Refusal | LateAnswer[T] | Awaitable[T] | None]) -> None:
    for members in runs.by_queue.values():
        window = op.dedup.window(members[0].row.topic)
        for chunk in _chunks(members):
            _append_run(op, chunk, answers, out, window)
    runs.by_queue.clear()


def _chunks(members: list[_Member]) -> list[list[_Member]]:
    """Runs the store takes in one append: at most BATCH_MAX_MESSAGES rows and about
    COALESCED_MAX_BYTES of bodies (a lone larger message is a run of its own)."""
    chunks: list[list[_Member]] = [[]]
    size = 0
    for m in members:
        if chunks[-1] and (len(chunks[-1]) >= BATCH_MAX_MESSAGES or size + m.body_bytes > COALESCED_MAX_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(m)
        size += m.body_bytes
    return chunks


def _append_run(op: SendOperation, run: list[_Member], answers: Sequence[Callable[[Sent], T]],
                out: list[T | Refusal | LateAnswer[T] | Awaitable[T] | None], window: DedupWindow | None) -> None:
    """``window``: the topic's duplicate window, if it has one (`_without_duplicates`)."""
    if window is not None:
        split = _without_duplicates(op, window, run, [m.row for m in run])
        if split is not None:
            fresh, again = split
            if fresh:
                _append_run(op, fresh, answers, out, window)
            for m in again:
                found = op.dedup.duplicate(window, m.row)
                if found is None:
                    _append_run(op, [m], answers, out, window)
                else:
                    out[m.index] = op.settle(Sent(*found), m.wait, answers[m.index])
            return
    if len(run) == 1:
        m = run[0]
        result = _put(op, window, m.queue_id, [m.row], m.body_bytes)
        out[m.index] = op.settle(Sent(result, m.queue_id), m.wait, answers[m.index])
        return
    result = _put(op, window, run[0].queue_id, [m.row for m in run], sum(m.body_bytes for m in run))
    if result.status in _ONE_MESSAGE_FAILED:
        for m in run:
            _append_run(op, [m], answers, out, window)
        return
    shared = result.ok  # a failed run's result is every request's, as it is
    for k, m in enumerate(run):
        # the k-th message's id and offset; the run's extent, so a sender waiting for a flush
        # or a slave waits for the whole run's
        out[m.index] = op.settle(Sent(result, m.queue_id, k if shared else None), m.wait, answers[m.index])


M = TypeVar("M")


def _without_duplicates(op: SendOperation, window: DedupWindow, members: list[M], rows: list[MessageInput]
                        ) -> tuple[list[M], list[M]] | None:
    """A run of single sends to a topic with a duplicate window (skiff/broker/dedup.py), as the
    members to append now and those to answer after them, one by one (their UNIQ_KEY is in the
    window, or repeats one of the run's: `Deduplication.duplicate` then finds the original);
    None when the run has no duplicate (it is appended whole, then recorded)."""
    at = op.dedup.duplicates(window, rows)
    if at is None:
        return None
    again = set(at)
    return [m for k, m in enumerate(members) if k not in again], [members[k] for k in at]


def _put(op: SendOperation, window: DedupWindow | None, queue_id: int, rows: list[MessageInput],
         body_bytes: int) -> PutResult:
    """The store's append of ``rows``, recorded in the topic's duplicate window if it has one."""
    result = op.put(rows, body_bytes)
    if window is not None:
        op.dedup.record(window, queue_id, rows, result)
    return result


AnswerRun = Callable[[list[int], PutResult, int, list[Any]], None]
"""Answers every send of a stored run: ``(request indices, result, queue id, into)`` writes the
k-th send's answer (its k-th id and offset) at its index of ``into``."""


def send_plain(op: SendOperation, plain: PlainSends, answers: Callable[[int], Callable[[Sent], T]],
               answer_run: AnswerRun, refuse: Callable[[int, Refusal], None], out: list[Any]) -> None:
    """A read of plain sends (see the module docstring). Each outcome goes to ``out`` at its
    request's index as `SendOperation.send` would give it, except: a refusal goes to
    ``refuse``, and a stored run's answers are made by ``answer_run`` for all of its sends at
    once: now when nothing waits (into ``out``), after the fsync under SYNC_FLUSH when every
    send of the run waits for it (`SendOperation.when_run_flushed`: ``out`` gets their late
    answers)."""
    groups, rows, waits = plain
    for (topic, queue_id), (template, nums, members, run_rows, body_bytes) in groups.items():
        target = op.target(topic, queue_id, template, nums)  # a named queue: the gate keeps its id
        if isinstance(target, Refusal):
            for i in members:
                refuse(i, target)
            continue
        if is_compacted(target[0]):
            members, run_rows, body_bytes = _with_keys(target[0].topic_name, members, rows, refuse)
            if not members:
                continue
        window = op.dedup.window_of(topic, target[0])
        if len(members) <= BATCH_MAX_MESSAGES and body_bytes <= COALESCED_MAX_BYTES:
            _put_plain(op, queue_id, members, run_rows, body_bytes, waits, answers, answer_run, out, window)
            continue
        for chunk in _chunks([_Member(i, rows[i], queue_id, waits[i], len(rows[i].body)) for i in members]):
            _put_plain(op, queue_id, [m.index for m in chunk], [m.row for m in chunk],
                       sum(m.body_bytes for m in chunk), waits, answers, answer_run, out, window)


def _with_keys(topic: str, members: list[int], rows: Sequence[MessageInput], refuse: Callable[[int, Refusal], None]
               ) -> tuple[list[int], list[MessageInput], int]:
    """A compacted topic's sends that carry KEYS; the others refused one by one, as `prepare` does."""
    kept = []
    for i in members:
        why = keys_refusal(topic, [rows[i]])
        if why is None:
            kept.append(i)
        else:
            refuse(i, Refusal(ResponseCode.MESSAGE_ILLEGAL, why))
    return kept, [rows[i] for i in kept], sum(len(rows[i].body) for i in kept)


def _put_plain(op: SendOperation, queue_id: int, members: list[int], run_rows: list[MessageInput], body_bytes: int,
               waits: Sequence[bool], answers: Callable[[int], Callable[[Sent], T]], answer_run: AnswerRun,
               out: list[Any], window: DedupWindow | None) -> None:
    if window is not None:
        split = _without_duplicates(op, window, members, run_rows)
        if split is not None:
            fresh, again = split
            row_of = dict(zip(members, run_rows))
            if fresh:
                fresh_rows = [row_of[i] for i in fresh]
                _put_plain(op, queue_id, fresh, fresh_rows, sum(len(r.body) for r in fresh_rows), waits, answers,
                           answer_run, out, window)
            for i in again:  # each as if it came alone, after the others were stored
                found = op.dedup.duplicate(window, row_of[i])
                if found is None:
                    row = row_of[i]
                    _put_plain(op, queue_id, [i], [row], len(row.body), waits, answers, answer_run, out, window)
                else:
                    out[i] = op.settle(Sent(*found), waits[i], answers(i))
            return
    # `_put` only where there is a window to record in: a lone send's run is one call fewer
    result = op.put(run_rows, body_bytes) if window is None else _put(op, window, queue_id, run_rows, body_bytes)
    if len(members) > 1 and result.status in _ONE_MESSAGE_FAILED:
        for i, row in zip(members, run_rows):
            _put_plain(op, queue_id, [i], [row], len(row.body), waits, answers, answer_run, out, window)
        return
    if result.status is _PUT_OK and not result.reason and not op.role.is_sync_master:
        if result.flushed is None or not any(waits[i] for i in members):
            answer_run(members, result, queue_id, out)  # nothing to wait for: `settle` would answer each now
            return
        if all(waits[i] for i in members):
            for i, late in zip(members, op.when_run_flushed(result, queue_id, members, answer_run, answers)):
                out[i] = late
            return
    shared = result.ok and len(members) > 1
    for k, i in enumerate(members):
        out[i] = op.settle(Sent(result, queue_id, k if shared else None), waits[i], answers(i))
