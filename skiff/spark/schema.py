"""The rows a skiff read yields: the Spark schema, its exact Arrow twin, and the
conversion of pulled messages into Arrow record batches.

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

from collections.abc import Sequence

import numpy as np
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

from skiff.common.message import MessageQueue
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage

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

_US_PER_MS = 1000


def record_batch(mq: MessageQueue, messages: Sequence[StoredMessage], include_properties: bool) -> pa.RecordBatch:
    """One Arrow batch of ``messages``, all pulled from ``mq``; built column by column."""
    n = len(messages)
    props = [m.properties for m in messages]
    columns = [
        pa.array([mq.topic] * n, pa.string()),
        pa.array([mq.broker_name] * n, pa.string()),
        pa.array(np.full(n, mq.queue_id, np.int32)),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.msg_id for m in messages], pa.string()),
        pa.array([p.get(Prop.KEYS) for p in props], pa.string()),
        pa.array([p.get(Prop.TAGS) for p in props], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        _properties(props) if include_properties else pa.nulls(n, ARROW_SCHEMA.field("properties").type),
        _timestamps([m.born_timestamp for m in messages]),
        _timestamps([m.store_timestamp for m in messages]),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _timestamps(ms: list[int]) -> pa.Array:
    return pa.array(np.asarray(ms, np.int64) * _US_PER_MS, TIMESTAMP)


def _properties(props: list[dict[str, str]]) -> pa.Array:
    """A map column from the property dicts, built from flat key and value lists (no per-row maps)."""
    offsets = [0]
    keys: list[str] = []
    values: list[str] = []
    hidden = HIDDEN_PROPERTIES
    for p in props:
        for k, v in p.items():
            if k not in hidden:
                keys.append(k)
                values.append(v)
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                   pa.array(values, pa.string()))
