"""The sink's columns, the messages rows become, their queues and their idempotent ids."""

import re

import pyarrow as pa
import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType

from skiff.client import SelectByHash
from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions
from skiff.spark.sink_rows import SinkColumns, idempotent_ids, place, rows_of

pytestmark = pytest.mark.spark


def options(**extra):
    return SinkOptions.parse(CaseInsensitiveDict({"namesrvAddr": "h:1", **extra}))


def schema(**columns):
    return StructType([StructField(name, kind) for name, kind in columns.items()])


@pytest.mark.parametrize("columns, extra, words", [
    ({"value": BinaryType()}, {"topic": "T"}, "no column 'value'"),
    ({"body": IntegerType()}, {"topic": "T"}, "column 'body' is int; the skiff sink wants binary or string"),
    ({"tags": StringType()}, {"topic": "T"}, "needs a body column"),
    ({"body": StringType()}, {}, "a topic column or the topic option"),
    ({"body": StringType(), "queue_id": IntegerType(), "shardingKey": StringType()}, {"topic": "T"}, "not both"),
    ({"body": StringType(), "broker": StringType()}, {"topic": "T"}, "only together with a queue_id"),
    ({"body": StringType(), "properties": MapType(StringType(), IntegerType())}, {"topic": "T"},
     "map<string,string>"),
])
def test_bad_columns_are_named(columns, extra, words):
    with pytest.raises(SparkOptionError) as err:
        SinkColumns.of(schema(**columns), options(**extra))
    assert words in str(err.value)


def test_rows_become_messages():
    cols = SinkColumns.of(schema(BODY=StringType(), topic=StringType(), tags=StringType(), keys=StringType(),
                                 properties=MapType(StringType(), StringType()), shardingKey=StringType()),
                          options(topic="Default"))
    batch = pa.RecordBatch.from_pydict({
        "BODY": ["héllo", "x"], "topic": [None, "Other"], "tags": ["t1", None], "keys": ["k1 k2", None],
        "properties": [[("a", "1")], None], "shardingKey": ["user-1", None],
    })
    first, second = rows_of(batch, cols, "Default", None, 0)
    assert (first.msg.topic, first.msg.body, first.msg.tags, first.msg.keys, first.sharding_key) == \
        ("Default", "héllo".encode(), "t1", ["k1", "k2"], "user-1")
    assert first.msg.properties["a"] == "1" and first.msg.uniq_key is None
    assert (second.msg.topic, second.msg.tags, second.sharding_key) == ("Other", None, None)


def test_null_body_and_missing_topic_fail_with_the_row_number():
    cols = SinkColumns.of(schema(body=BinaryType(), topic=StringType()), options(topic="T"))
    with pytest.raises(SparkOptionError, match="row 11 of this partition has an empty or null body"):
        rows_of(pa.RecordBatch.from_pydict({"body": [b"a", None], "topic": ["T", "T"]}), cols, "T", None, 10)
    with pytest.raises(SparkOptionError, match="row 0 of this partition has a null topic"):
        rows_of(pa.RecordBatch.from_pydict({"body": [b"a"], "topic": pa.array([None], pa.string())}), cols, None,
                None, 0)


def test_idempotent_ids_are_stable_and_distinct():
    ids = idempotent_ids("stream/q1/7", 2)
    assert ids(5) == idempotent_ids("stream/q1/7", 2)(5)
    assert re.fullmatch(r"[0-9A-F]{32}", ids(5))
    others = {idempotent_ids("stream/q1/7", 3)(5), idempotent_ids("stream/q1/8", 2)(5), ids(6)}
    assert ids(5) not in others and len(others) == 3
    cols = SinkColumns.of(schema(body=BinaryType()), options(topic="T"))
    rows = rows_of(pa.RecordBatch.from_pydict({"body": [b"a", b"b"]}), cols, "T", ids, 4)
    assert [r.msg.uniq_key for r in rows] == [ids(4), ids(5)]


def test_placement():
    one = tuple(MessageQueue("T", "broker-a", i) for i in range(4))
    two = one + tuple(MessageQueue("T", "broker-b", i) for i in range(4))
    cols = SinkColumns.of(schema(body=BinaryType(), queue_id=IntegerType(), broker=StringType()), options(topic="T"))
    batch = pa.RecordBatch.from_pydict(
        {"body": [b"a"] * 4, "queue_id": [2, None, 1, 9], "broker": [None, None, "broker-b", None]})
    pinned, free, other_broker, missing = rows_of(batch, cols, "T", None, 0)
    assert place(pinned, one) == MessageQueue("T", "broker-a", 2)
    assert place(free, two) is None
    assert place(other_broker, two) == MessageQueue("T", "broker-b", 1)
    with pytest.raises(SparkOptionError, match="needs a broker column"):
        place(pinned, two)
    with pytest.raises(SparkOptionError, match="T@broker-a:9 is not a writable queue"):
        place(missing, one)
    keyed = SinkColumns.of(schema(body=BinaryType(), shardingKey=StringType()), options(topic="T"))
    rows = rows_of(pa.RecordBatch.from_pydict({"body": [b"a"] * 3, "shardingKey": ["u1", "u2", "u1"]}), keyed, "T",
                   None, 0)
    assert place(rows[0], two) == place(rows[2], two) == SelectByHash()(two, rows[0].msg, "u1")
