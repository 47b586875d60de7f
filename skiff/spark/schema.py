"""The rows a skiff read yields: the Spark schema and its exact Arrow twin (the batches
themselves are built by `skiff.spark.arrow_decode`).

Spark checks a `pyarrow.RecordBatch` from ``read()`` against the Arrow form of
the Spark schema and refuses any difference (``int32`` for a long, a map whose
entries are named otherwise, a timestamp in ms or without a zone), so
`ARROW_SCHEMA` is written out by hand (in `skiff.tier.columns`, whose files hold the same
columns first) and a test compares it with PySpark's own
conversion. Timestamps are microseconds in UTC, as Spark keeps them.

``properties`` holds a message's properties except those with a column of their
own (TAGS, KEYS, UNIQ_KEY), the WAIT flag every producer sets, and those the
client adds on every pull (MIN_OFFSET, MAX_OFFSET, which change as the queue
grows and would make two reads of the same range differ); it is null when
``includeProperties=false``.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from skiff.tier.columns import HIDDEN_PROPERTIES, SOURCE_FIELDS, TIMESTAMP

SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("broker", StringType()),
    StructField("queue_id", IntegerType()),
    StructField("queue_offset", LongType()),
    StructField("msg_id", StringType()),
    StructField("keys", StringType()),
    StructField("tags", StringType()),
    StructField("body", BinaryType()),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("born_timestamp", TimestampType()),
    StructField("store_timestamp", TimestampType()),
    StructField("reconsume_times", IntegerType()),
])
"""The read schema, as `DataSource.schema` gives it to Spark."""

ARROW_SCHEMA = pa.schema(SOURCE_FIELDS)
"""The same columns as Arrow, defined with the tier's files (`skiff.tier.columns`), which hold
them first so that the source hands tiered row groups on as they are."""
