"""Produce: each partition's record batch becomes one append of RocketMQ messages to the
queue of the same number, through the same `SendOperation` (gate, writer, store) as the
other doors; the batch's records get consecutive queue offsets, so Kafka's base offset is
the first one's queue offset.

A batch of more records than the store appends at once (`BATCH_MAX_MESSAGES`; librdkafka
batches up to 10,000) is appended in consecutive chunks with nothing awaited between them.
A compressed batch is decompressed here and stored as plain messages, one per record, so
RocketMQ consumers read them as any message and Fetch serves them to any Kafka client
(uncompressed). An idempotent producer's batch is checked against its sequence first
(`skiff.broker.kafka.idempotence`), and recorded as soon as it is appended; with acks=−1
the answer then waits for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from skiff.broker.kafka.errors import put_error, refusal_error
from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY, ProducerStates, batch_property
from skiff.broker.kafka.mapping import record_properties
from skiff.broker.operations import Refusal, SendOperation, Sent
from skiff.broker.operations.send import DEFAULT_TEMPLATE
from skiff.common.errors import DecodeError
from skiff.common.limits import BATCH_MAX_MESSAGES
from skiff.common.properties import encode_properties
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import RecordBatch, decode_batches
from skiff.store import MessageInput

log = logging.getLogger(__name__)


class Produce:
    def __init__(self, send: SendOperation, producers: ProducerStates, auto_create_queue_nums: int) -> None:
        self.send = send
        self.producers = producers
        self.auto_create_queue_nums = auto_create_queue_nums

    async def partition(self, topic: str, partition: int, queue: int | ErrorCode, records: bytes | None, acks: int,
                        host: bytes) -> dict[str, Any]:
        """One partition's answer: error code, base offset, log start offset. ``queue``: the
        partition's queue on this broker, or why this broker does not serve it."""
        answer: dict[str, Any] = {"index": partition, "base_offset": -1, "log_append_time_ms": -1,
                                  "log_start_offset": -1, "record_errors": []}
        if isinstance(queue, ErrorCode):
            return answer | _error(queue, f"partition {partition} of {topic} is not led by this broker")
        try:
            batches = decode_batches(records or b"")
        except DecodeError as exc:
            return answer | _error(ErrorCode.CORRUPT_MESSAGE, str(exc))
        if len(batches) != 1:
            return answer | _error(ErrorCode.INVALID_RECORD, f"a partition's records must be one batch, "
                                                             f"{len(batches)} were sent")
        batch = batches[0]
        if batch.is_transactional or batch.is_control:
            return answer | _error(ErrorCode.INVALID_RECORD, "transactional batches are not served by Skiff yet")
        target = self.send.target(topic, queue, DEFAULT_TEMPLATE, self.auto_create_queue_nums)
        if isinstance(target, Refusal):
            return answer | _error(refusal_error(target), target.reason)
        tc, queue_id = target
        check = self.producers.check(topic, queue_id, batch)
        if check.error is not ErrorCode.NONE:
            return answer | _error(check.error, check.reason)
        if check.duplicate_of is not None:
            return answer | {"error_code": 0, "base_offset": check.duplicate_of}
        rows = self._rows(topic, queue_id, batch, host)
        if isinstance(rows, str):
            return answer | _error(ErrorCode.INVALID_RECORD, rows)
        base_offset = -1
        for start in range(0, len(rows), BATCH_MAX_MESSAGES):
            chunk = rows[start:start + BATCH_MAX_MESSAGES]
            outcome = self.send.append(tc, queue_id, chunk, sum(len(r.body) for r in chunk), False, _sent)
            if isinstance(outcome, Refusal):
                return answer | _error(refusal_error(outcome), outcome.reason)
            sent = outcome if isinstance(outcome, Sent) else await _settled(outcome)
            error = put_error(sent.result.status, acks)
            if error is not ErrorCode.NONE:
                return answer | _error(error, sent.result.reason or sent.result.status.name)
            base_offset = sent.result.queue_offset if base_offset < 0 else base_offset
        # recorded once stored, before the wait: a retry after a timed-out wait is a duplicate
        self.producers.appended(topic, queue_id, batch, base_offset)
        if acks == -1:  # the flush / slave wait of the last chunk covers the ones before it
            settled = self.send.settle(sent, True, _sent)
            sent = settled if isinstance(settled, Sent) else await _settled(settled)
            error = put_error(sent.result.status, acks)
            if error is not ErrorCode.NONE:
                return answer | _error(error, sent.result.reason or sent.result.status.name)
        return answer | {"error_code": 0, "base_offset": base_offset,
                         "log_start_offset": self.send.store.get_min_offset(topic, queue_id)}

    def _rows(self, topic: str, queue_id: int, batch: RecordBatch, host: bytes) -> list[MessageInput] | str:
        rows: list[MessageInput] = []
        recorded = batch_property(batch)
        for rec in batch.records:
            props = record_properties(rec)
            if recorded is not None and len(rows) == len(batch.records) - 1:
                props[PRODUCER_PROPERTY] = recorded  # on the last: read back, the whole batch is there
            row = self.send.writer.message(topic, queue_id, rec.value or b"", props, encode_properties(props), 0, 0,
                                           rec.timestamp, host)
            if isinstance(row, str):
                return row
            rows.append(row)
        if not rows:
            return "a batch with no records"
        return rows


def _sent(sent: Sent) -> Sent:
    return sent


async def _settled(outcome: Awaitable[Sent]) -> Sent:
    return await outcome


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message}

