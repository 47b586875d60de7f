"""Produce: each partition's record batch becomes RocketMQ messages appended to the queue of
the same number, through the same `SendOperation` (gate, writer, store) as the other doors;
the batch's records get consecutive queue offsets, so Kafka's base offset is the first
one's queue offset.

The partitions that arrive together — every Produce request of one read of a connection
(a producer with many requests in flight, each of one partition's batch), and every
partition of one request — are appended together: one `Appends` collects them per queue,
in arrival order, and appends each queue's batches in one write (`SendOperation.append`),
each answered with its own base offset; a Produce of one record then costs a share of one
append, flush wait and write instead of a whole one (docs/performance.md, "Kafka Produce of
one record"). A run the store refuses (a compacted topic's keyless record, say) is appended
again batch by batch, so each gets its own answer.

A batch of keyless records without headers (what a batching producer sends by default) is read
straight into its store rows by the compiled decoder (`records.decode_plain_rows`: no `Record`
and no Python call per record); any other batch is decoded into `Record`s and each mapped
(`Produce.rows`), which is also the path without the kernel.

A batch of more records than the store appends at once (`BATCH_MAX_MESSAGES`; librdkafka
batches up to 10,000) is appended alone in consecutive chunks with nothing awaited between
them. A compressed batch is decompressed here and stored as plain messages, one per record,
so RocketMQ consumers read them as any message and Fetch serves them to any Kafka client
(uncompressed). An idempotent producer's batch is checked against its sequence first
(`skiff.broker.kafka.idempotence`), and recorded as soon as it is appended; a batch of a
producer whose previous batch on the queue waits in the same run is checked after that run
is appended, so sequences are checked exactly as one batch at a time would be. With acks=−1
the answer then waits for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER): one wait per run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, NamedTuple

from skiff.broker.kafka.errors import put_error, refusal_error
from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY, ProducerStates, batch_property
from skiff.broker.kafka.mapping import record_properties
from skiff.broker.operations import Refusal, SendOperation, Sent
from skiff.broker.operations.send import DEFAULT_TEMPLATE
from skiff.common.errors import DecodeError
from skiff.common.limits import BATCH_MAX_MESSAGES
from skiff.common.properties import encode_properties
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.frames import RequestHeader, encode_response
from skiff.protocol.kafka.produce_wire import PRODUCE_KEY, ProduceOne, produce_answer
from skiff.protocol.kafka.records import CONTROL, TRANSACTIONAL, RecordBatch, decode_batches, decode_plain_rows
from skiff.protocol.bodies.topic import TopicConfig
from skiff.store import MessageInput, PutStatus
from skiff.transport.late import LateAnswer

log = logging.getLogger(__name__)
_SEQUENCES = 1 << 31
"""Kafka's producer sequences wrap at 2^31 (`skiff.broker.kafka.idempotence`)."""
_NONE = ErrorCode.NONE
_WAITS: set[asyncio.Future[None]] = set()
"""The waits for a flush and a slave both (SYNC_FLUSH under SYNC_MASTER) under way: a task the
loop only holds weakly is kept here until it is done."""


class Stored(NamedTuple):
    """One partition's answer: Kafka's error code (and why), its base offset and log start
    offset (-1 where Kafka says unknown)."""

    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


Outcome = Stored | LateAnswer[Stored]
"""A partition's answer now, or given when its flush / slave wait is over."""


def _refused(code: ErrorCode, message: str) -> Stored:
    return Stored(code, message=message)


class _Member(NamedTuple):
    batch: RecordBatch
    rows: list[MessageInput]
    start: int
    """Its first row's index in its run."""
    acks: int
    at: int
    """Its place in `Appends.outcomes`."""


class _Run:
    """The batches of one queue waiting to be appended together."""

    __slots__ = ("topic", "tc", "queue_id", "members", "rows", "body_bytes", "producers")

    def __init__(self, topic: str, tc: TopicConfig, queue_id: int) -> None:
        self.topic, self.tc, self.queue_id = topic, tc, queue_id
        self.members: list[_Member] = []
        self.rows: list[MessageInput] = []
        self.body_bytes = 0
        self.producers: dict[int, tuple[int, int]] = {}
        """An idempotent producer's epoch and next sequence after its last batch in the run."""


class Produce:
    def __init__(self, send: SendOperation, producers: ProducerStates, auto_create_queue_nums: int) -> None:
        self.send = send
        self.producers = producers
        self.auto_create_queue_nums = auto_create_queue_nums

    def appends(self, host: bytes) -> Appends:
        """A collector for the partitions that arrive together from the client at ``host``."""
        return Appends(self, host)

    def plain(self, records: bytes | None, topic: str, queue_id: int, host: bytes
              ) -> tuple[RecordBatch, list[MessageInput], int] | None:
        """A batch of keyless records without headers (a batching producer's usual one) read
        straight into its store rows by the compiled decoder: (its header, its rows, their
        body bytes), an idempotent batch's last row with the property that records it; None
        for anything else, which `decode` and `rows` read."""
        if records is None:
            return None
        plain = decode_plain_rows(records, topic, queue_id, host, MessageInput)
        if plain is None or plain[0].producer_id < 0:
            return plain
        batch, rows, body_bytes = plain
        last, recorded = rows[-1], batch_property(batch)
        assert recorded is not None, "an idempotent batch is recorded"
        props = {PRODUCER_PROPERTY: recorded}
        row = self.send.writer.message(topic, queue_id, last.body, props, encode_properties(props), 0, 0,
                                       last.born_timestamp, host)
        if isinstance(row, str):
            return None  # the reference path answers it
        rows[-1] = row
        return batch, rows, body_bytes

    def decode(self, records: bytes | None) -> RecordBatch | Stored:
        """A partition's one record batch, or the answer that refuses it."""
        try:
            batches = decode_batches(records or b"")
        except DecodeError as exc:
            return _refused(ErrorCode.CORRUPT_MESSAGE, str(exc))
        if len(batches) != 1:
            return _refused(ErrorCode.INVALID_RECORD, f"a partition's records must be one batch, "
                                                      f"{len(batches)} were sent")
        batch = batches[0]
        if batch.attributes & (TRANSACTIONAL | CONTROL):
            return _refused(ErrorCode.INVALID_RECORD, "transactional batches are not served by Skiff yet")
        return batch

    def rows(self, topic: str, queue_id: int, batch: RecordBatch, host: bytes) -> list[MessageInput] | str:
        rows: list[MessageInput] = []
        recorded = batch_property(batch) if batch.producer_id >= 0 else None
        message = self.send.writer.message
        last = len(batch.records) - 1
        for rec in batch.records:
            _, timestamp, key, value, headers = rec
            if recorded is None and not headers and key is None and value is not None:
                # a keyless record without headers (the common one-record Produce) has no
                # properties, so nothing for the writer to redirect or strip: its row as the
                # writer makes it, without the writer's checks, which cost more than the row
                rows.append(MessageInput(topic, queue_id, value, b"", 0, 0, timestamp, host))
                continue
            props = record_properties(rec) if headers or key is not None or value is None else {}
            if recorded is not None and len(rows) == last:
                props[PRODUCER_PROPERTY] = recorded  # on the last: read back, the whole batch is there
            row = message(topic, queue_id, value or b"", props, encode_properties(props) if props else b"", 0, 0,
                          timestamp, host)
            if isinstance(row, str):
                return row
            rows.append(row)
        if not rows:
            return "a batch with no records"
        return rows


class Appends:
    """The partitions of one read (or one request), appended per queue when `flush`ed.
    ``outcomes`` holds each `add`ed partition's answer in order: a refusal or a duplicate's at
    once, a stored one's after `flush` — a `Stored`, or a `LateAnswer` the flush or slave wait
    gives."""

    def __init__(self, produce: Produce, host: bytes) -> None:
        self.produce = produce
        self.send = produce.send
        self.host = host
        self.outcomes: list[Outcome | None] = []
        self._runs: dict[tuple[str, int], _Run] = {}
        self._targets: dict[tuple[str, int], tuple[TopicConfig, int] | Refusal] = {}

    def add(self, topic: str, partition: int, queue: int | ErrorCode, records: bytes | None, acks: int) -> None:
        """One partition's batch. ``queue``: the partition's queue on this broker, or why
        this broker does not serve it."""
        outcomes = self.outcomes
        index = len(outcomes)
        if isinstance(queue, ErrorCode):
            outcomes.append(_refused(queue, f"partition {partition} of {topic} is not led by this broker"))
            return
        produce = self.produce
        plain = produce.plain(records, topic, queue, self.host)  # (the queue a Kafka partition names is its own)
        if plain is None:
            batch = produce.decode(records)
            if isinstance(batch, Stored):
                outcomes.append(batch)
                return
        else:
            batch = plain[0]
        target = self._targets.get((topic, queue))
        if target is None:  # the gate's answer holds for the read (one look per topic and queue)
            target = self._targets[(topic, queue)] = self.send.target(topic, queue, DEFAULT_TEMPLATE,
                                                                       produce.auto_create_queue_nums)
        if isinstance(target, Refusal):
            outcomes.append(_refused(refusal_error(target), target.reason))
            return
        tc, queue_id = target
        run = self._runs.get((topic, queue_id))
        pid = batch.producer_id
        follows = False
        if run is not None and pid >= 0 and pid in run.producers:
            follows = run.producers[pid] == (batch.producer_epoch, batch.base_sequence)
            if not follows:  # its previous batch first: the sequence check sees it stored
                self._append(run)
                run = None
        if pid >= 0 and not follows:  # (a batch that follows one waiting in the run is in sequence)
            refused = self._checked(topic, queue_id, batch)
            if refused is not None:
                outcomes.append(refused)
                return
        if plain is None:
            rows = produce.rows(topic, queue_id, batch, self.host)
            if isinstance(rows, str):
                outcomes.append(_refused(ErrorCode.INVALID_RECORD, rows))
                return
            body_bytes = len(rows[0].body) if len(rows) == 1 else sum(len(r.body) for r in rows)
        else:
            rows, body_bytes = plain[1], plain[2]
        outcomes.append(None)  # until its run is appended
        if len(rows) > BATCH_MAX_MESSAGES:  # alone, in chunks, after what waits for its queue
            if run is not None:
                self._append(run)
            self._append_chunks(topic, tc, queue_id, _Member(batch, rows, 0, acks, index))
            return
        if run is not None and len(run.rows) + len(rows) > BATCH_MAX_MESSAGES:
            self._append(run)
            run = None
        if run is None:
            run = self._runs[(topic, queue_id)] = _Run(topic, tc, queue_id)
        run.members.append(_Member(batch, rows, len(run.rows), acks, index))
        run.rows += rows
        run.body_bytes += body_bytes
        if pid >= 0:
            run.producers[pid] = (batch.producer_epoch, (batch.base_sequence + batch.last_offset_delta + 1) % _SEQUENCES)

    def _checked(self, topic: str, queue_id: int, batch: RecordBatch) -> Stored | None:
        """An idempotent batch's answer when its sequence check settles it (a gap, an old
        epoch, a duplicate); None when it is to be appended."""
        check = self.produce.producers.check(topic, queue_id, batch)
        if check.error is not ErrorCode.NONE:
            return _refused(check.error, check.reason)
        if check.duplicate_of is not None:
            return Stored(base_offset=check.duplicate_of)
        return None

    def flush(self) -> list[Outcome]:
        """Append every run, in the order the runs were started; every partition's outcome."""
        for run in list(self._runs.values()):
            self._append(run)
        outcomes = self.outcomes
        assert None not in outcomes, "a partition added is answered once its run is appended"
        return outcomes  # type: ignore[return-value]  # no None: checked

    def _append(self, run: _Run) -> None:
        del self._runs[(run.topic, run.queue_id)]
        members = run.members
        outcome = self.send.append(run.tc, run.queue_id, run.rows, run.body_bytes, False, _sent)
        assert isinstance(outcome, (Sent, Refusal)), "an append that does not wait is settled at once"
        if len(members) > 1 and (isinstance(outcome, Refusal) or not outcome.result.ok):
            for m in members:  # each alone: its own answer (and what the others can store is stored)
                refused = self._checked(run.topic, run.queue_id, m.batch) if m.batch.producer_id >= 0 else None
                if refused is not None:  # its producer's batch before it in the run was not stored
                    self.outcomes[m.at] = refused
                    continue
                alone = self.send.append(run.tc, run.queue_id, m.rows, sum(len(r.body) for r in m.rows), False, _sent)
                self._appended(run.topic, run.queue_id, [m._replace(start=0)], alone)
            return
        self._appended(run.topic, run.queue_id, members, outcome)

    def _appended(self, topic: str, queue_id: int, members: list[_Member],
                  outcome: Sent | Refusal | LateAnswer[Sent] | Awaitable[Sent]) -> None:
        assert isinstance(outcome, (Sent, Refusal)), "an append that does not wait is settled at once"
        if isinstance(outcome, Refusal):
            refused = _refused(refusal_error(outcome), outcome.reason)
            for m in members:
                self.outcomes[m.at] = refused
            return
        self._stored(topic, queue_id, members, outcome)

    def _append_chunks(self, topic: str, tc: TopicConfig, queue_id: int, member: _Member) -> None:
        rows, base_offset = member.rows, -1
        sent: Sent | None = None
        for start in range(0, len(rows), BATCH_MAX_MESSAGES):
            chunk = rows[start:start + BATCH_MAX_MESSAGES]
            outcome = self.send.append(tc, queue_id, chunk, sum(len(r.body) for r in chunk), False, _sent)
            assert isinstance(outcome, (Sent, Refusal)), "an append that does not wait is settled at once"
            if isinstance(outcome, Refusal):
                self.outcomes[member.at] = _refused(refusal_error(outcome), outcome.reason)
                return
            sent = outcome
            error = put_error(sent.result.status, member.acks)
            if error is not ErrorCode.NONE:
                self.outcomes[member.at] = _refused(error, sent.result.reason or sent.result.status.name)
                return
            base_offset = sent.result.queue_offset if base_offset < 0 else base_offset
        assert sent is not None
        # the flush / slave wait of the last chunk covers the ones before it
        self._stored(topic, queue_id, [member._replace(start=base_offset - sent.result.queue_offset)], sent)

    def _stored(self, topic: str, queue_id: int, members: list[_Member], sent: Sent) -> None:
        """A run appended: each batch recorded (before any wait: a retry after a timed-out
        wait is a duplicate), answered now (acks=1, an error, nothing to wait for) or after
        the run's wait."""
        result, outcomes = sent.result, self.outcomes
        base = result.queue_offset
        waiting: list[_Member] = []
        log_start = -1
        ok = result.status is PutStatus.PUT_OK
        for m in members:
            error = ErrorCode.NONE if ok else put_error(result.status, m.acks)
            if error is not ErrorCode.NONE:
                outcomes[m.at] = _refused(error, result.reason or result.status.name)
                continue
            if m.batch.producer_id >= 0:
                self.produce.producers.appended(topic, queue_id, m.batch, base + m.start)
            if m.acks == -1:
                waiting.append(m)
            else:
                if log_start < 0:
                    log_start = self.send.store.get_min_offset(topic, queue_id)
                outcomes[m.at] = Stored(_NONE, base + m.start, log_start)
        if not waiting:
            return
        lates: dict[int, LateAnswer[Stored]] = {}

        def answer(settled: Sent) -> None:
            """Each waiting batch's answer: at once (nothing to wait for) or from the wait's callback."""
            status = settled.result.status
            start = self.send.store.get_min_offset(topic, queue_id)
            if status is PutStatus.PUT_OK and not lates:  # answered at once, all stored (positional: one per batch)
                for m in waiting:
                    outcomes[m.at] = Stored(_NONE, base + m.start, start)
                return
            for m in waiting:
                error = ErrorCode.NONE if status is PutStatus.PUT_OK else put_error(status, m.acks)
                stored = Stored(_NONE, base + m.start, start) if error is ErrorCode.NONE \
                    else _refused(error, settled.result.reason or status.name)
                late = lates.get(m.at)
                if late is not None:
                    late.give(stored)
                else:
                    outcomes[m.at] = stored
        settled = self.send.settle(sent, True, answer)
        if settled is None:
            return  # answered at once
        for m in waiting:
            if outcomes[m.at] is None:  # (not answered while settle ran)
                late = lates[m.at] = LateAnswer()
                outcomes[m.at] = late
        if not isinstance(settled, LateAnswer):  # the fsync and a slave both: a coroutine that calls answer
            task = asyncio.ensure_future(settled)
            _WAITS.add(task)
            task.add_done_callback(_WAITS.discard)


def partition_body(partition: int, stored: Stored) -> dict[str, Any]:
    """A partition's answer in a ProduceResponse (the schema's field names)."""
    return {"index": partition, "error_code": int(stored.error), "base_offset": stored.base_offset,
            "log_append_time_ms": -1, "log_start_offset": stored.log_start_offset, "record_errors": [],
            "error_message": stored.message}


def _sent(sent: Sent) -> Sent:
    return sent


def answer_frame(req: ProduceOne, stored: Stored) -> bytes:
    """The answer frame to a one-partition Produce (`produce_wire`): a success in one pack,
    anything else through the schema's encoder."""
    if stored.error is ErrorCode.NONE:
        return produce_answer(req, req.topic.encode("utf-8"), stored.base_offset, stored.log_start_offset)
    return encode_response(RequestHeader(PRODUCE_KEY, req.version, req.correlation_id, ""),
                           {"responses": [{"name": req.topic, "partition_responses": [
                               partition_body(req.partition, stored)]}], "throttle_time_ms": 0})
