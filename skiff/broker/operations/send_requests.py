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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.send import SendOperation, SendRequest, Sent, Targeted
from skiff.common.limits import BATCH_MAX_MESSAGES, COALESCED_MAX_BYTES
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageInput, PutStatus
from skiff.store.dispatcher import NOT_CONSUMABLE
from skiff.transport.late import LateAnswer

T = TypeVar("T")

_ONE_MESSAGE_FAILED = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})


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
        for chunk in _chunks(members):
            _append_run(op, chunk, answers, out)
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
                out: list[T | Refusal | LateAnswer[T] | Awaitable[T] | None]) -> None:
    if len(run) == 1:
        m = run[0]
        out[m.index] = op.settle(Sent(op.put([m.row], m.body_bytes), m.queue_id), m.wait, answers[m.index])
        return
    result = op.put([m.row for m in run], sum(m.body_bytes for m in run))
    if result.status in _ONE_MESSAGE_FAILED:
        for m in run:
            _append_run(op, [m], answers, out)
        return
    shared = result.ok  # a failed run's result is every request's, as it is
    for k, m in enumerate(run):
        # the k-th message's id and offset; the run's extent, so a sender waiting for a flush
        # or a slave waits for the whole run's
        out[m.index] = op.settle(Sent(result, m.queue_id, k if shared else None), m.wait, answers[m.index])
