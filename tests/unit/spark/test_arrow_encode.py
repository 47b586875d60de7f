"""The sink's column-wise batch encoding against the producer's message-by-message one:
decoded again, every record holds the message `Message.of` would make of the row, with
the WAIT flag and the row's msg id, and chunks stay within the limits. Bad rows are named."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType

from skiff.common.message import Message, MessageQueue
from skiff.protocol.message_codec import decode_batch, encode_batch
from skiff.common.msgid import UNIQ_IDS
from skiff.spark.arrow_encode import by_value, chunks, encode, uniq_ids
from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions
from skiff.spark.sink_rows import SinkColumns

pytestmark = pytest.mark.spark

SCHEMA = StructType([StructField("body", BinaryType()), StructField("topic", StringType()),
                     StructField("tags", StringType()), StructField("keys", StringType()),
                     StructField("properties", MapType(StringType(), StringType())),
                     StructField("shardingKey", StringType())])
COLUMNS = SinkColumns.of(SCHEMA, SinkOptions.parse(CaseInsensitiveDict({"namesrvAddr": "h:1", "topic": "T"})))
text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)
optional = st.one_of(st.none(), text)
row = st.tuples(st.binary(min_size=1, max_size=30), optional, optional,
                st.one_of(st.none(), st.dictionaries(text.filter(lambda k: k and k.upper() == k.lower()), optional,
                                                     max_size=3)),
                optional)


def arrow(rows) -> pa.RecordBatch:
    bodies, tags, keys, props, shard = zip(*rows)
    return pa.RecordBatch.from_pydict({
        "body": pa.array(bodies, pa.binary()), "topic": pa.array([None] * len(rows), pa.string()),
        "tags": pa.array(tags, pa.string()), "keys": pa.array(keys, pa.string()),
        "properties": pa.array([list(p.items()) if p is not None else None for p in props],
                               pa.map_(pa.string(), pa.string())),
        "shardingKey": pa.array(shard, pa.string())})


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=12), first=st.integers(0, 1000))
def test_records_decode_to_the_messages_the_producer_would_send(rows, first):
    ids = [f"{first + i:032X}" for i in range(len(rows))]
    encoded = encode(arrow(rows), COLUMNS, "T", ids, first)
    sends = chunks(encoded, np.arange(len(rows)), "T", None, max_rows=5)
    assert [len(s.msg_ids) for s in sends] == [min(5, len(rows) - i) for i in range(0, len(rows), 5)]
    got = [m for s in sends for m in decode_batch(s.body, "T")]
    messages = [Message.of("T", body, tags=tags, keys=keys,
                           properties={k: v or "" for k, v in (props or {}).items()}, sharding_key=shard)
                for body, tags, keys, props, shard in rows]
    expected = decode_batch(encode_batch(messages, iter(ids).__next__), "T")
    assert [(m.body, m.properties, m.flag) for m in got] == [(m.body, m.properties, m.flag) for m in expected]
    assert [i for s in sends for i in s.msg_ids] == ids


def test_chunks_keep_to_the_byte_limit_and_pick_rows_in_order():
    rows = [(bytes([65 + i]) * 100, None, None, None, None) for i in range(10)]
    encoded = encode(arrow(rows), COLUMNS, "T", [f"ID{i}" for i in range(10)], 0)
    mq = MessageQueue("T", "broker-a", 1)
    sends = chunks(encoded, np.array([1, 3, 4, 8]), "T", mq, max_bytes=300)
    assert [s.msg_ids for s in sends] == [["ID1", "ID3"], ["ID4", "ID8"]]
    assert all(s.queue == mq and len(s.body) <= 300 for s in sends)
    assert [m.body[:1] for s in sends for m in decode_batch(s.body, "T")] == [b"B", b"D", b"E", b"I"]
    assert {k: v.tolist() for k, v in by_value(["a", "b", "a"]).items()} == {"a": [0, 2], "b": [1]}


@pytest.mark.parametrize("change, words", [
    ({"body": [b"a", None]}, "row 11 of this partition has an empty or null body"),
    ({"body": [b"a", b""]}, "row 11 of this partition has an empty or null body"),
    ({"tags": ["ok", "a\x01b"]}, "row 11 of this partition has a 0x01 or 0x02 separator byte"),
    ({"properties": [[("n", "1")], [("TAGS", "x")]]}, "row 11 of this partition has the property 'TAGS' in its "
                                                      "properties column: use the tags column"),
    ({"properties": [[("DELAY", "3")], None]}, "row 10 of this partition has the property 'DELAY'"),
    ({"properties": [[("n", "a\x02")], None]}, "row 10 of this partition has the property 'n'"),
    ({"properties": [None, [("", "v")]]}, "a property needs a name"),
    ({"tags": ["t" * 40000, None]}, "row 10 of this partition has properties of more than 32767 bytes"),
])
def test_bad_rows_are_named(change, words):
    data = {"body": [b"a", b"b"], "topic": pa.array([None, None], pa.string()), "tags": [None, None],
            "keys": [None, None], "properties": pa.array([None, None], pa.map_(pa.string(), pa.string())),
            "shardingKey": pa.array([None, None], pa.string())}
    data.update(change)
    data["properties"] = pa.array(data["properties"], pa.map_(pa.string(), pa.string()))
    data["tags"] = pa.array(data["tags"], pa.string())
    with pytest.raises(SparkOptionError, match=words):
        encode(pa.RecordBatch.from_pydict(data), COLUMNS, "T", ["A", "B"], 10)


def test_a_null_topic_without_the_option_is_named():
    batch = pa.RecordBatch.from_pydict({"body": [b"a"], "topic": pa.array([None], pa.string())})
    with pytest.raises(SparkOptionError, match="row 0 of this partition has a null topic and no topic option"):
        encode(batch, COLUMNS, None, ["A"], 0)


def test_column_wise_msg_ids_are_uniq_keys_like_the_producers_and_never_repeat():
    many = uniq_ids(70_000).to_pylist()  # more than one millisecond's 65,536 counters
    assert len(set(many)) == len(many)
    one = UNIQ_IDS.next_id()
    few = uniq_ids(3).to_pylist()
    after = UNIQ_IDS.next_id()
    assert len({one, *few, after}) == 5
    assert all(len(i) == 32 and i == i.upper() and int(i, 16) >= 0 for i in many + few)
    assert {i[:20] for i in many + few} == {one[:20]}  # ip, pid and the process's random part
    assert [int(i[28:], 16) for i in [one, *few, after]] == [(int(one[28:], 16) + k) & 0xFFFF for k in range(5)]
