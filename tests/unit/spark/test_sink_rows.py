"""The sink's columns, the messages rows become, their queues and their idempotent ids."""

import re

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType

from skiff.client import SelectByHash
from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions
from skiff.spark.sink_rows import SinkColumns, idempotent_ids, place

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


def test_idempotent_ids_are_stable_and_distinct():
    ids = idempotent_ids("stream/q1/7", 2)
    assert ids(5) == idempotent_ids("stream/q1/7", 2)(5)
    assert re.fullmatch(r"[0-9A-F]{32}", ids(5))
    others = {idempotent_ids("stream/q1/7", 3)(5), idempotent_ids("stream/q1/8", 2)(5), ids(6)}
    assert ids(5) not in others and len(others) == 3


def test_placement():
    one = tuple(MessageQueue("T", "broker-a", i) for i in range(4))
    two = one + tuple(MessageQueue("T", "broker-b", i) for i in range(4))
    assert place("T", None, 2, None, one) == MessageQueue("T", "broker-a", 2)
    assert place("T", None, None, None, two) is None
    assert place("T", "broker-b", 1, None, two) == MessageQueue("T", "broker-b", 1)
    with pytest.raises(SparkOptionError, match="needs a broker column"):
        place("T", None, 2, None, two)
    with pytest.raises(SparkOptionError, match="T@broker-a:9 is not a writable queue"):
        place("T", None, 9, None, one)
    assert place("T", None, None, "u1", two) == place("T", None, None, "u1", two) == \
        SelectByHash()(two, None, "u1")
    assert {place("T", None, None, f"u{i}", two) for i in range(20)} != {place("T", None, None, "u1", two)}
