"""The read schema: its Arrow form is exactly what Spark's reader checks batches against."""

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.spark.schema import ARROW_SCHEMA, SCHEMA, record_batch

pytestmark = pytest.mark.spark

MQ = MessageQueue("Orders", "broker-b", 3)


def test_arrow_schema_is_sparks_own_conversion():
    # plan_data_source_read compares each batch with to_arrow_schema(schema, timezone="UTC")
    assert ARROW_SCHEMA.equals(to_arrow_schema(SCHEMA, timezone="UTC"))


def message(offset, body, props, born_ms=1_700_000_000_123, reconsume=0):
    return StoredMessage("Orders", body, props, queue_id=3, queue_offset=offset, born_timestamp=born_ms,
                         store_timestamp=born_ms + 7, reconsume_times=reconsume, offset_msg_id=f"OFF{offset}")


def test_record_batch_values():
    msgs = [
        message(40, b"\x00one", {"UNIQ_KEY": "U1", "TAGS": "created", "KEYS": "k1 k2", "WAIT": "true",
                                 "MIN_OFFSET": "0", "MAX_OFFSET": "99", "region": "eu"}),
        message(41, b"two", {}, reconsume=2),
    ]
    rows = record_batch(MQ, msgs, include_properties=True).to_pylist()
    assert rows[0] == {
        "topic": "Orders", "broker": "broker-b", "queue_id": 3, "queue_offset": 40, "msg_id": "U1",
        "keys": "k1 k2", "tags": "created", "body": b"\x00one", "properties": [("region", "eu")],
        "born_timestamp": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc),
        "store_timestamp": datetime(2023, 11, 14, 22, 13, 20, 130000, tzinfo=timezone.utc),
        "reconsume_times": 0,
    }
    assert (rows[1]["msg_id"], rows[1]["keys"], rows[1]["tags"], rows[1]["properties"], rows[1]["reconsume_times"]) \
        == ("OFF41", None, None, [], 2)


def test_properties_are_null_when_not_included():
    batch = record_batch(MQ, [message(0, b"x", {"a": "b"})], include_properties=False)
    assert batch.schema.equals(ARROW_SCHEMA)
    assert batch.column("properties").null_count == 1
    assert batch.column("properties").type == pa.map_(pa.string(), pa.string())
