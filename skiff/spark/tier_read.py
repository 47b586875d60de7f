"""The executor side of a partition: a `TierRange` read from the tier's Parquet files, a
`QueueRange` pulled from its broker (`skiff.spark.pull`)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from skiff.columnar.schema import ARROW_SCHEMA
from skiff.columnar.schema import SOURCE_COLUMNS
from skiff.common.limits import SPARK_TIER_BATCH_ROWS
from skiff.spark.options import SourceOptions
from skiff.spark.pull import QueueRange, read_range
from skiff.spark.tier_plan import TierRange, tier_of
from skiff.tier.manifest import Segment
from skiff.tier.tier import Tier, checked, row_groups_within

_PROPERTIES = SOURCE_COLUMNS.index("properties")
_NO_PROPERTIES = [c for c in SOURCE_COLUMNS if c != "properties"]


def read_partition(options: SourceOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(part, TierRange):
        return read_tier_range(options, part)
    assert isinstance(part, QueueRange)
    return read_range(options, part)


def read_tier_range(options: SourceOptions, part: TierRange) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[start, end)`` of the partition's files, in offset order, as the
    source's batches (properties null with includeProperties=false).

    Every byte is checked against the manifest's SHA-256 before any of its rows is used: a file
    the range covers whole is fetched whole (one get, one hash); of a file it covers in part
    (the range starts or ends inside it, as where ``maxRecordsPerPartition`` cuts a queue) only
    the row groups it overlaps are fetched, when the manifest records their byte ranges
    (`Tier.fetch_row_groups`). The rows are decoded by pyarrow's streaming reader into batches
    of `SPARK_TIER_BATCH_ROWS` rows (across row groups), only those row groups (by their
    offset statistics), on this thread (the executor's cores are Spark's). The batches come out
    of the reader in the source's schema (the file's first columns are its Arrow schema), so a
    batch is handed to Spark as decoded; only a batch at an end of the range is sliced (zero
    copy). What is left per row is per byte: the fetch, the SHA-256 and the Parquet decoding
    (docs/performance.md)."""
    tier = tier_of(options)
    columns = SOURCE_COLUMNS if options.include_properties else _NO_PROPERTIES
    for seg in part.files:
        f, groups = _fetched(tier, seg, part.start, part.end)
        if not groups:
            continue
        for batch in f.iter_batches(SPARK_TIER_BATCH_ROWS, groups, columns, use_threads=False):
            batch = _within(batch, part.start, part.end)
            if not batch.num_rows:
                continue
            if not options.include_properties:
                batch = _null_properties(batch)
            yield batch


def _fetched(tier: Tier, seg: Segment, start: int, end: int) -> tuple[pq.ParquetFile, list[int]]:
    """The row groups of ``seg``'s file that may hold offsets ``[start, end)``, and a file to
    read them from: those alone fetched when the range covers the file in part and the manifest
    records ranges, else the whole file (checked against the manifest's size and SHA-256)."""
    if seg.ranged() and (start > seg.first_offset or end <= seg.last_offset):
        footer = tier.fetch_footer(seg)
        groups = list(row_groups_within(footer, start, end))
        return (tier.fetch_row_groups(seg, footer, groups) if groups else footer), groups
    f = pq.ParquetFile(pa.BufferReader(checked(seg, tier.backend.get(seg.file))))
    return f, list(row_groups_within(f, start, end))


def _within(batch: pa.RecordBatch, start: int, end: int) -> pa.RecordBatch:
    """The rows of ``batch`` with queue offsets in ``[start, end)``: a zero-copy slice, since a
    tiered file's offsets ascend (a compacted file's have gaps, never a step back)."""
    offsets = batch.column("queue_offset").to_numpy()
    if not len(offsets) or (offsets[0] >= start and offsets[-1] < end):
        return batch
    lo, hi = np.searchsorted(offsets, (start, end))
    return batch.slice(int(lo), int(hi - lo))


def _null_properties(batch: pa.RecordBatch) -> pa.RecordBatch:
    field = ARROW_SCHEMA.field(_PROPERTIES)
    return batch.add_column(_PROPERTIES, field, pa.nulls(batch.num_rows, field.type))
