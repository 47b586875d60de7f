"""The executor side of a partition: a `TierRange` read from the tier's Parquet file, a
`QueueRange` pulled from its broker (`skiff.spark.pull`)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition

from skiff.spark.options import SourceOptions
from skiff.spark.pull import BATCH_MIN_ROWS, QueueRange, read_range
from skiff.spark.schema import ARROW_SCHEMA
from skiff.spark.tier_plan import TierRange, tier_of
from skiff.tier.columns import SOURCE_COLUMNS
from skiff.tier.manifest import Segment
from skiff.tier.tier import checked

TIER_BATCH_ROWS = 16 * BATCH_MIN_ROWS
"""Rows per Arrow batch handed to Spark from a tiered file (about a row group or four)."""


def read_partition(options: SourceOptions, part: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(part, TierRange):
        return read_tier_range(options, part)
    assert isinstance(part, QueueRange)
    return read_range(options, part)


def read_tier_range(options: SourceOptions, part: TierRange) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[start, end)`` of the partition's file, in offset order, as the
    source's batches (properties null with includeProperties=false)."""
    tier = tier_of(options)
    seg = Segment(part.queue_id, part.start, part.end - 1, 0, 0, part.file, 0, part.size_bytes, part.sha256)
    data = checked(seg, tier.backend.get(part.file))
    table = pq.read_table(io.BytesIO(data), columns=SOURCE_COLUMNS)
    offsets = table.column("queue_offset")
    bounds = pc.min_max(offsets)
    if table.num_rows and (bounds["min"].as_py() < part.start or bounds["max"].as_py() >= part.end):
        table = table.filter(pc.and_(pc.greater_equal(offsets, part.start), pc.less(offsets, part.end)))
    if not options.include_properties:
        at = table.schema.get_field_index("properties")
        table = table.set_column(at, ARROW_SCHEMA.field("properties"), pa.nulls(table.num_rows,
                                                                                ARROW_SCHEMA.field("properties").type))
    yield from table.cast(ARROW_SCHEMA).to_batches(max_chunksize=TIER_BATCH_ROWS)
