"""The executor side of a read: pull one queue's exact offset range and yield Arrow batches.

Pull answers stay raw (`AsyncPullClient.pull_raw`): each answer's records are
located and trimmed to the segment by their queue offsets (numpy), and a
batch's worth of answers is decoded column-wise into one Arrow record batch
(`skiff.columnar.arrow_decode`), with no Python object per message.

A range ``[start, end)`` is cut into segments of ``pullBatchSize`` offsets, and
rounds of `IN_FLIGHT_SEGMENTS` of them are pulled concurrently on the client's
event loop (the blocking facade's shared loop thread); `ROUNDS_AHEAD` rounds are
on the wire while the task thread turns the last one into Arrow. A segment is pulled until its end, whatever the
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
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import islice
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from skiff.client import AsyncPullClient, PullStatus, RawPullResult
from skiff.client.blocking import loop_thread
from skiff.columnar.arrow_decode import decode_run
from skiff.columnar.record_columns import gather, record_starts
from skiff.common.message import MessageQueue
from skiff.common.record import QUEUE_OFFSET_AT
from skiff.spark import clients
from skiff.spark.errors import DataLossError
from skiff.spark.metadata import data_loss_message
from skiff.spark.offsets import OffsetRange
from skiff.spark.options import SourceOptions

log = logging.getLogger(__name__)

IN_FLIGHT_SEGMENTS = 16
"""Segments one round pulls at once (each of up to ``pullBatchSize`` messages)."""
ROUNDS_AHEAD = 2
"""Rounds on the wire at once: while the task turns one into Arrow, the next is already
answered and the one after it is asked for, so a round's slowest answer does not leave the
broker idle (on a loaded machine every hand-off waits for a CPU)."""
BATCH_MIN_ROWS = 1024
BATCH_MIN_BYTES = 1 << 20
"""Pull answers are gathered into Arrow batches of at least this many rows or bytes (or the
range's rest): large enough that a batch's fixed cost is small, small enough that the JVM
copies it into rows while it is still in the CPU's cache (measured: 16 MiB batches cost the
JVM more per row than 1 MiB ones)."""
_NONE = np.zeros(0, np.int64)
RETRY_PAUSE_S = 0.005
"""Pause before pulling again an offset the broker answered 'retry at once' for (PULL_RETRY_IMMEDIATELY
at the same offset: a broker fetching the offset from its tier on a worker thread)."""


def _asks_retry(result: RawPullResult, offset: int) -> bool:
    """An answer with no messages that asks for the same offset again."""
    return result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset == offset and not result.body


@dataclass(frozen=True, slots=True)
class QueueRange(InputPartition):
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


class Run(NamedTuple):
    """The records of one pull answer that a read keeps: its buffer and where they start."""

    buf: bytes
    starts: np.ndarray
    recheck_tags: frozenset[str] | None


def read_range(options: SourceOptions, part: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``part`` as Arrow batches, in offset order."""
    reader = _SegmentReader(options, clients.pull_client(options.namesrv_addr), part)
    thread = loop_thread()
    step = options.pull_batch_size
    starts = iter(range(part.start, part.end, step))

    def next_round() -> Future[list[Run]] | None:
        bounds = [(lo, min(lo + step, part.end)) for lo in islice(starts, IN_FLIGHT_SEGMENTS)]
        return thread.submit(reader.round(bounds)) if bounds else None

    pending = deque(r for r in (next_round() for _ in range(ROUNDS_AHEAD)) if r is not None)
    runs: list[Run] = []
    rows = size = 0
    while pending:
        done = pending.popleft().result()
        following = next_round()
        if following is not None:
            pending.append(following)
        for run in done:
            runs.append(run)
            rows += len(run.starts)
            size += len(run.buf)
            if rows >= BATCH_MIN_ROWS or size >= BATCH_MIN_BYTES:
                yield decode_runs(runs, part.mq, options.include_properties)
                runs, rows, size = [], 0, 0
    if rows:
        yield decode_runs(runs, part.mq, options.include_properties)


def decode_runs(runs: list[Run], mq: MessageQueue, include_properties: bool) -> pa.RecordBatch:
    """One record batch of ``runs`` (their buffers joined, so the columns are built once)."""
    runs = [r for r in runs if len(r.starts)]
    if len(runs) == 1:
        buf, starts = runs[0].buf, runs[0].starts
    else:
        shifts = np.cumsum([0] + [len(r.buf) for r in runs[:-1]])
        buf = b"".join(r.buf for r in runs)
        starts = np.concatenate([r.starts + shift for r, shift in zip(runs, shifts)])
    return decode_run(buf, starts, mq, include_properties, runs[0].recheck_tags)


class _SegmentReader:
    """Pulls the segments of one range, a round of them at a time, on the client's loop."""

    def __init__(self, options: SourceOptions, client: AsyncPullClient | None, part: QueueRange) -> None:
        self.options = options
        self.client = client
        self.mq = part.mq
        self.end = part.end
        self.unfiltered = options.expression_type == "TAG" and options.sub_expression.strip() in ("", "*")
        self.compacted = part.compacted

    async def round(self, bounds: list[tuple[int, int]]) -> list[Run]:
        segments = await asyncio.gather(*(self.segment(lo, hi) for lo, hi in bounds))
        return [run for segment in segments for run in segment]

    async def segment(self, offset: int, end: int) -> list[Run]:
        assert self.client is not None
        out: list[Run] = []
        retry_until = 0.0
        while offset < end:
            result = await self.client.pull_raw(
                self.mq, offset, min(self.options.pull_batch_size, end - offset),
                sub_expression=self.options.sub_expression, expression_type=self.options.expression_type,
                timeout_ms=self.options.pull_timeout_ms)
            starts = record_starts(result.body) if result.body else _NONE
            queue_offsets = gather(np.frombuffer(result.body, np.uint8), starts + QUEUE_OFFSET_AT, 8, ">i8")
            resume = self._after_loss(offset, end, result, int(queue_offsets[0]) if len(starts) else None)
            if resume != offset:
                offset = resume
                continue
            if _asks_retry(result, offset):  # a broker fetching tiered data (docs/tiered-storage.md)
                retry_until = retry_until or time.monotonic() + self.options.pull_timeout_ms / 1000
                if time.monotonic() > retry_until:
                    raise RuntimeError(f"{self.mq}: the broker kept answering 'retry' at offset {offset} for "
                                       f"pullTimeoutMs={self.options.pull_timeout_ms}")
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            retry_until = 0.0
            keep = (queue_offsets >= offset) & (queue_offsets < end)
            out.append(Run(result.body, starts[keep], result.recheck_tags))
            if result.next_begin_offset <= offset:
                raise RuntimeError(f"{self.mq}: the broker answered {result.status.value} at offset {offset} "
                                   f"without moving on (next offset {result.next_begin_offset})")
            offset = result.next_begin_offset
        return out

    def _after_loss(self, offset: int, end: int, result: RawPullResult, first: int | None) -> int:
        """``offset``, or where reading resumes after messages the broker no longer has (if allowed);
        ``first`` is the queue offset of the answer's first record."""
        if offset < result.min_offset:
            resume = result.min_offset
        elif result.status is PullStatus.OFFSET_ILLEGAL or result.status is PullStatus.NO_NEW_MSG:
            self._lost(f"topic {self.mq.topic}, broker {self.mq.broker_name}, queue {self.mq.queue_id} ends at "
                       f"offset {result.max_offset}, before the end {self.end} this read was planned with: the "
                       f"broker lost messages it had stored (a store cut short by a crash?)")
            return end
        elif self.unfiltered and result.status is PullStatus.NO_MATCHED_MSG and not _asks_retry(result, offset):
            resume = result.next_begin_offset
        elif self.unfiltered and first is not None and first > offset:
            if self.compacted:  # compaction removed the offsets in between
                return offset
            resume = first
        else:
            return offset
        self._lost(data_loss_message([(self.mq, offset, resume)]))
        return resume

    def _lost(self, text: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(text)
        log.warning("%s (failOnDataLoss=false: skipped)", text)
