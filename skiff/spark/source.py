"""The skiff source: `SkiffBatchReader` (``spark.read``) and `SkiffStreamReader` (``spark.readStream``).

Planning runs on the driver (bounds, offsets, partitions); ``read`` runs on the
executors with only the options and the partition (`skiff.spark.pull`). A
reader object holds options and plain values only, since Spark pickles it.

Streaming: offsets are per queue (`skiff.spark.offsets`); a queue that appears
between micro-batches (a new topic of ``topicPattern``, more queues, a new
broker) starts at its earliest offset. ``maxMessagesPerTrigger`` becomes
Spark's ``ReadMaxRows``, split across queues in proportion to their backlog,
and with ``trigger(availableNow=True)`` the query stops at the offsets seen
when it started. ``commit`` writes ``consumerGroup``'s offsets to the brokers;
Spark calls it when it plans the next micro-batch, so the group's offsets lag
one batch behind the checkpoint (which stays the truth on restart).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from skiff.spark import metadata, tier_plan
from skiff.spark.offsets import Offsets, from_spark, plan_ranges, rate_limit, to_spark
from skiff.spark.options import EARLIEST, LATEST, SourceOptions
from skiff.spark.pull import QueueRange
from skiff.spark.tier_read import read_partition


def _partitions(options: SourceOptions, start: Offsets, end: Offsets) -> list[InputPartition]:
    ranges = plan_ranges(start, end, options.min_partitions, options.max_records_per_partition)
    compacted = metadata.compacted_topics(options, sorted({r.mq.topic for r in ranges}))
    return tier_plan.split(options, [QueueRange.of(r, r.mq.topic in compacted) for r in ranges])


class SkiffBatchReader(DataSourceReader):
    """Reads from startingOffsets/startingTimestamp (default earliest) to endingOffsets/endingTimestamp
    (default latest); an end past a queue's latest offset reads to the latest."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return _partitions(self.options, *self.offsets())

    def offsets(self) -> tuple[Offsets, Offsets]:
        """Where the read starts and ends in each queue (``skiff export`` plans its copies of
        tiered files from them too)."""
        table = metadata.bounds(self.options)
        start = metadata.starting_offsets(self.options, table, EARLIEST)
        start = metadata.check_data_loss(self.options, start, table)
        end = {mq: min(off, table[mq].max_offset) for mq, off in metadata.ending_offsets(self.options, table).items()}
        return start, end

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


class SkiffStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over every queue of the topics, from startingOffsets (default latest)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._initial: Offsets | None = None
        self._target: Offsets | None = None
        self._latest: Offsets | None = None

    def initialOffset(self) -> dict:
        # Spark asks more than once when a query starts; "latest" must not move in between
        if self._initial is None:
            table = metadata.bounds(self.options)
            self._initial = metadata.starting_offsets(self.options, table, LATEST)
        return to_spark(self._initial)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {mq: b.max_offset for mq, b in metadata.bounds(self.options).items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_spark(start)
        table = metadata.bounds(self.options)
        self._latest = {mq: b.max_offset for mq, b in table.items()}
        target = self._latest if self._target is None else {
            mq: min(off, self._latest.get(mq, off)) for mq, off in self._target.items()}
        known = {mq: begin.get(mq, table[mq].min_offset if mq in table else 0) for mq in target}
        known = metadata.check_data_loss(self.options, known, table)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(known, target, limit.max_rows)
        else:
            end = {mq: max(off, known[mq]) for mq, off in target.items()}
        return to_spark({**begin, **end})

    def reportLatestOffset(self) -> dict | None:
        return to_spark(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_spark(start), from_spark(end)
        new = [mq for mq in stop if mq not in begin]
        if new:
            table = metadata.bounds(self.options, sorted({mq.topic for mq in new}))
            begin.update({mq: table[mq].min_offset if mq in table else stop[mq] for mq in new})
        return _partitions(self.options, begin, stop)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)

    def commit(self, end: dict) -> None:
        metadata.commit_group_offsets(self.options, from_spark(end))
