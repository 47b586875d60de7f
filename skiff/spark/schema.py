"""The rows a skiff read yields: the Spark schema and its exact Arrow twin (the batches
themselves are built by `skiff.spark.arrow_decode`).

Spark checks a `pyarrow.RecordBatch` from ``read()`` against the Arrow form of
the Spark schema and refuses any difference (``int32`` for a long, a map whose
entries are named otherwise, a timestamp in ms or without a zone), so
`ARROW_SCHEMA` is written out by hand and a test compares it with PySpark's own
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

from skiff.common.properties import Prop

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

TIMESTAMP = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("broker", pa.string()),
    pa.field("queue_id", pa.int32()),
    pa.field("queue_offset", pa.int64()),
    pa.field("msg_id", pa.string()),
    pa.field("keys", pa.string()),
    pa.field("tags", pa.string()),
    pa.field("body", pa.binary()),
    pa.field("properties", pa.map_(pa.string(), pa.string())),
    pa.field("born_timestamp", TIMESTAMP),
    pa.field("store_timestamp", TIMESTAMP),
    pa.field("reconsume_times", pa.int32()),
])

HIDDEN_PROPERTIES = frozenset({Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY, Prop.WAIT, Prop.MIN_OFFSET, Prop.MAX_OFFSET})
"""Properties left out of the ``properties`` column (see the module docstring)."""
