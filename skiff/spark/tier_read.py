"""The executor side of a partition: a `TierRange` read from the tier's Parquet file, a
`QueueRange` pulled from its broker (`skiff.spark.pull`)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from skiff.spark.options import SourceOptions
from skiff.spark.pull import QueueRange, read_range
from skiff.spark.schema import ARROW_SCHEMA
from skiff.spark.tier_plan import TierRange, tier_of
from skiff.tier.columns import SOURCE_COLUMNS
from skiff.tier.manifest import Segment
from skiff.tier.tier import checked, row_groups_within


def read_partition(options: SourceOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(part, TierRange):
        return read_tier_range(options, part)
    assert isinstance(part, QueueRange)
    return read_range(options, part)


def read_tier_range(options: SourceOptions, part: TierRange) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[start, end)`` of the partition's files, in offset order, as the
    source's batches (properties null with includeProperties=false).

    Each file is fetched whole (its SHA-256 is checked against the manifest before any of its
    rows is used), then decoded a row group at a time, only the row groups the range overlaps
    (by their offset statistics), on this thread (the executor's cores are Spark's); each row
    group (`TIER_ROW_GROUP_MESSAGES` rows) is one batch to Spark, the first one sent after one
    row group is decoded, not after the whole file. Per row, what is left is per byte: the
    fetch, the SHA-256, the Parquet decoding and the copy to the JVM (docs/performance.md)."""
    tier = tier_of(options)
    columns = SOURCE_COLUMNS if options.include_properties else [c for c in SOURCE_COLUMNS if c != "properties"]
    for one in part.files:
        seg = Segment(part.queue_id, part.start, part.end - 1, 0, 0, one.file, 0, one.size_bytes, one.sha256)
        f = pq.ParquetFile(pa.BufferReader(checked(seg, tier.backend.get(one.file))))
        for i in row_groups_within(f, part.start, part.end):
            group = f.read_row_group(i, columns=columns, use_threads=False)
            offsets = group.column("queue_offset")
            bounds = pc.min_max(offsets)
            if group.num_rows and (bounds["min"].as_py() < part.start or bounds["max"].as_py() >= part.end):
                group = group.filter(pc.and_(pc.greater_equal(offsets, part.start), pc.less(offsets, part.end)))
            if not options.include_properties:
                group = group.add_column(SOURCE_COLUMNS.index("properties"), ARROW_SCHEMA.field("properties"),
                                         pa.nulls(group.num_rows, ARROW_SCHEMA.field("properties").type))
            yield from group.cast(ARROW_SCHEMA).to_batches()
