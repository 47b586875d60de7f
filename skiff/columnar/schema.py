"""The twelve columns a read of stored records gives, as Arrow: the one definition that
the Spark source's batches (`skiff.spark.schema` states them to Spark) and the tier's
files (`skiff.tier.columns`, which add the record's remaining fields after them) share.

Timestamps are microseconds in UTC, as Spark keeps them. ``properties`` holds a
message's properties except `HIDDEN_PROPERTIES`: those with a column of their own
(TAGS, KEYS, UNIQ_KEY), the WAIT flag every producer sets, and those the client adds
on every pull (MIN_OFFSET, MAX_OFFSET, which change as the queue grows and would make
two reads of the same range differ).
"""

from __future__ import annotations

import pyarrow as pa

from skiff.common.properties import Prop

TIMESTAMP = pa.timestamp("us", tz="UTC")
SOURCE_FIELDS = [
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
]
"""The source's columns, in order (a test holds them equal to PySpark's conversion of
`skiff.spark.schema.SCHEMA`: Spark refuses a batch whose Arrow types differ at all)."""
SOURCE_COLUMNS = [f.name for f in SOURCE_FIELDS]
ARROW_SCHEMA = pa.schema(SOURCE_FIELDS)
"""The schema of `skiff.columnar.arrow_decode.decode_run`'s batches."""

HIDDEN_PROPERTIES = frozenset({Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY, Prop.WAIT, Prop.MIN_OFFSET, Prop.MAX_OFFSET})
"""Properties left out of the ``properties`` map."""
