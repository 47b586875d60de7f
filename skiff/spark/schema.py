"""The rows a skiff read yields, as the Spark schema (the batches themselves are built
by `skiff.columnar.arrow_decode`).

Spark checks a `pyarrow.RecordBatch` from ``read()`` against the Arrow form of
the Spark schema and refuses any difference (``int32`` for a long, a map whose
entries are named otherwise, a timestamp in ms or without a zone), so the batches'
Arrow schema is written out by hand (`skiff.columnar.schema.ARROW_SCHEMA`, shared with
the tier's files, which hold the same columns first) and a test compares it with
PySpark's own conversion of `SCHEMA`. Timestamps are microseconds in UTC, as Spark
keeps them; ``properties`` (less `skiff.columnar.schema.HIDDEN_PROPERTIES`) is null
when ``includeProperties=false``.
"""

from __future__ import annotations

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
