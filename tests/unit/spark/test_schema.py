"""The read schema: its Arrow form is exactly what Spark's reader checks batches against."""

from datetime import datetime, timezone

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from skiff.columnar.arrow_decode import decode_run
from skiff.columnar.schema import ARROW_SCHEMA
from skiff.common.message import MessageQueue
from skiff.common.msgid import create_offset_msg_id
from skiff.common.record import pack_host, record_size, write_record
from skiff.spark.schema import SCHEMA

pytestmark = pytest.mark.spark

MQ = MessageQueue("Orders", "broker-b", 3)


def test_arrow_schema_is_sparks_own_conversion():
    # plan_data_source_read compares each batch with to_arrow_schema(schema, timezone="UTC")
    assert ARROW_SCHEMA.equals(to_arrow_schema(SCHEMA, timezone="UTC"))


def record(offset: int, body: bytes, props: str, born_ms: int = 1_700_000_000_123, reconsume: int = 0) -> bytes:
    raw = bytearray(record_size(len(body), 6, len(props.encode())))
    write_record(raw, 0, queue_id=3, flag=0, queue_offset=offset, physical_offset=5000 + offset, sys_flag=0,
                 born_timestamp=born_ms, born_host=pack_host("127.0.0.1", 1), store_timestamp=born_ms + 7,
                 store_host=STORE_HOST, reconsume_times=reconsume, prepared_transaction_offset=0, body=body,
                 topic=b"Orders", properties=props.encode())
    return bytes(raw)


STORE_HOST = pack_host("10.0.0.9", 10911)


def test_record_batch_values():
    buf = record(40, b"\x00one", "UNIQ_KEY\x01U1\x02TAGS\x01created\x02KEYS\x01k1 k2\x02WAIT\x01true\x02"
                                  "MIN_OFFSET\x010\x02MAX_OFFSET\x0199\x02region\x01eu\x02") + record(41, b"two", "", reconsume=2)
    rows = decode_run(buf, None, MQ, include_properties=True).to_pylist()
    assert rows[0] == {
        "topic": "Orders", "broker": "broker-b", "queue_id": 3, "queue_offset": 40, "msg_id": "U1",
        "keys": "k1 k2", "tags": "created", "body": b"\x00one", "properties": [("region", "eu")],
        "born_timestamp": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc),
        "store_timestamp": datetime(2023, 11, 14, 22, 13, 20, 130000, tzinfo=timezone.utc),
        "reconsume_times": 0,
    }
    assert (rows[1]["msg_id"], rows[1]["keys"], rows[1]["tags"], rows[1]["properties"], rows[1]["reconsume_times"]) \
        == (create_offset_msg_id(STORE_HOST, 5041), None, None, [], 2)


def test_properties_are_null_when_not_included():
    batch = decode_run(record(0, b"x", "a\x01b\x02"), None, MQ, include_properties=False)
    assert batch.schema.equals(ARROW_SCHEMA)
    assert batch.column("properties").null_count == 1
    assert batch.column("properties").type == pa.map_(pa.string(), pa.string())
