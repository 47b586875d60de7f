"""The executor side of a read: pull one queue's exact offset range and yield Arrow batches.

A range ``[start, end)`` is cut into segments of ``pullBatchSize`` offsets, and
rounds of `IN_FLIGHT_SEGMENTS` of them are pulled concurrently on the client's
event loop (the blocking facade's shared loop thread); the next round is on the
wire while the task thread turns the last one into Arrow. A segment is pulled until its end, whatever the
broker returns per answer (the broker caps answers by count and bytes; a tag
filter may scan past the segment, so messages beyond it are dropped). Segments
are consumed in order, so every message comes back exactly once and in offset
order, and two reads of the same range give the same rows (Spark may read a
partition twice).

Data loss is what retention did under the query: the broker reports a minimum
offset above the one asked, answers OFFSET_ILLEGAL, or (unfiltered reads) a
run of messages starts past the offset asked. With ``failOnDataLoss`` the task
fails naming the queue and the offsets; without it the gap is logged and
skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import islice

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from skiff.client import AsyncPullClient, PullResult, PullStatus
from skiff.client.blocking import loop_thread
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.spark import clients
from skiff.spark.errors import DataLossError
from skiff.spark.metadata import data_loss_message
from skiff.spark.offsets import OffsetRange
from skiff.spark.options import SourceOptions
from skiff.spark.schema import record_batch

log = logging.getLogger(__name__)

IN_FLIGHT_SEGMENTS = 16
"""Segments one round pulls at once (each of up to ``pullBatchSize`` messages)."""
BATCH_MIN_ROWS = 4096
"""Segments are gathered into Arrow batches of at least this many rows (or the range's rest)."""


@dataclass(frozen=True, slots=True)
class QueueRange(InputPartition):  # type: ignore[misc]
    """One Spark partition: offsets ``[start, end)`` of one queue (picklable, no clients)."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    compacted: bool = False
    """The topic is compacted (docs/compaction.md): gaps in its offsets are removed
    records, not data loss."""

    @classmethod
    def of(cls, r: OffsetRange, compacted: bool = False) -> QueueRange:
        return cls(r.mq.topic, r.mq.broker_name, r.mq.queue_id, r.start, r.end, compacted)

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)


def read_range(options: SourceOptions, part: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``part`` as Arrow batches, in offset order."""
    reader = _SegmentReader(options, clients.pull_client(options.namesrv_addr), part)
    thread = loop_thread()
    step = options.pull_batch_size
    starts = iter(range(part.start, part.end, step))

    def next_round() -> Future[list[StoredMessage]] | None:
        bounds = [(lo, min(lo + step, part.end)) for lo in islice(starts, IN_FLIGHT_SEGMENTS)]
        return thread.submit(reader.round(bounds)) if bounds else None

    pending = next_round()
    rows: list[StoredMessage] = []
    while pending is not None:
        rows.extend(pending.result())
        pending = next_round()
        if rows and (len(rows) >= BATCH_MIN_ROWS or pending is None):
            yield record_batch(part.mq, rows, options.include_properties)
            rows = []


class _SegmentReader:
    """Pulls the segments of one range, a round of them at a time, on the client's loop."""

    def __init__(self, options: SourceOptions, client: AsyncPullClient | None, part: QueueRange) -> None:
        self.options = options
        self.client = client
        self.mq = part.mq
        self.end = part.end
        self.unfiltered = options.expression_type == "TAG" and options.sub_expression.strip() in ("", "*")
        self.compacted = part.compacted

    async def round(self, bounds: list[tuple[int, int]]) -> list[StoredMessage]:
        segments = await asyncio.gather(*(self.segment(lo, hi) for lo, hi in bounds))
        return [m for segment in segments for m in segment]

    async def segment(self, offset: int, end: int) -> list[StoredMessage]:
        assert self.client is not None
        out: list[StoredMessage] = []
        while offset < end:
            result = await self.client.pull(
                self.mq, offset, min(self.options.pull_batch_size, end - offset),
                sub_expression=self.options.sub_expression, expression_type=self.options.expression_type,
                timeout_ms=self.options.pull_timeout_ms)
            resume = self._after_loss(offset, end, result)
            if resume != offset:
                offset = resume
                continue
            out.extend(m for m in result.messages if offset <= m.queue_offset < end)
            if result.next_begin_offset <= offset:
                raise RuntimeError(f"{self.mq}: the broker answered {result.status.value} at offset {offset} "
                                   f"without moving on (next offset {result.next_begin_offset})")
            offset = result.next_begin_offset
        return out

    def _after_loss(self, offset: int, end: int, result: PullResult) -> int:
        """``offset``, or where reading resumes after messages the broker no longer has (if allowed)."""
        if offset < result.min_offset:
            resume = result.min_offset
        elif result.status is PullStatus.OFFSET_ILLEGAL or result.status is PullStatus.NO_NEW_MSG:
            self._lost(f"topic {self.mq.topic}, broker {self.mq.broker_name}, queue {self.mq.queue_id} ends at "
                       f"offset {result.max_offset}, before the end {self.end} this read was planned with: the "
                       f"broker lost messages it had stored (a store cut short by a crash?)")
            return end
        elif self.unfiltered and result.status is PullStatus.NO_MATCHED_MSG:
            resume = result.next_begin_offset
        elif self.unfiltered and result.messages and result.messages[0].queue_offset > offset:
            if self.compacted:  # compaction removed the offsets in between
                return offset
            resume = result.messages[0].queue_offset
        else:
            return offset
        self._lost(data_loss_message([(self.mq, offset, resume)]))
        return resume

    def _lost(self, text: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(text)
        log.warning("%s (failOnDataLoss=false: skipped)", text)
