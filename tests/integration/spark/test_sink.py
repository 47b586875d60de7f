"""df.write / df.writeStream .format("skiff"): what lands on the brokers, read back with Skiff's
consumer and with the RocketMQ C++ client; idempotent ids on a replayed micro-batch."""

from __future__ import annotations

import collections

import pytest
from pyspark.sql import functions as F

from skiff.client import Message, MessageQueue
from tests.integration.spark.kit import create_topic, finish, pull_all, reader, send, spark_quiet
from tests.interop._cpp import run_script

pytestmark = pytest.mark.spark

ROWS = 40


def test_batch_write_lands_every_row_and_the_cpp_client_reads_it(spark, cluster, tmp_path):
    ns = cluster.namesrv_addr
    # one broker: the C++ client's Python pull consumer keys its offsets by topic and queue id only
    topic = create_topic(ns, "sink", queues=3, broker_addr=cluster.broker_addr(0))
    data = [(f"body-{i}", "even" if i % 2 == 0 else "odd", f"order-{i}", {"n": str(i)}, f"user-{i % 5}")
            for i in range(ROWS)]
    df = spark.createDataFrame(data, "body string, tags string, keys string, properties map<string,string>, "
                                     "shardingKey string")
    df.write.format("skiff").mode("append").option("namesrvAddr", ns).option("topic", topic).save()

    stored = pull_all(ns, topic)
    got = sorted((m.body.decode(), m.tags, m.properties["KEYS"], m.properties["n"], m.properties["__SHARDINGKEY"])
                 for _, m in stored)
    assert got == sorted((body, tags, keys, props["n"], user) for body, tags, keys, props, user in data)
    queues_of_user = collections.defaultdict(set)
    for mq, m in stored:
        queues_of_user[m.properties["__SHARDINGKEY"]].add(mq)
    assert all(len(q) == 1 for q in queues_of_user.values()), queues_of_user
    assert len(set().union(*queues_of_user.values())) > 1

    cpp = run_script(tmp_path / "home", "pull_consumer",
                     {"namesrv": ns, "group": "CG-spark-sink", "topic": topic, "expected": ROWS})["messages"]
    assert sorted((m["id"], m["body"], m["tags"]) for m in cpp) == \
        sorted((m.msg_id, m.body.decode(), m.tags) for _, m in stored)


def test_rows_pinned_to_a_queue_land_there(spark, cluster):
    ns = cluster.namesrv_addr
    topic = create_topic(ns, "pinned", queues=2)
    data = [(f"p-{i}".encode(), topic, i % 2, "broker-b" if i % 3 else "broker-a") for i in range(12)]
    df = spark.createDataFrame(data, "body binary, topic string, queue_id int, broker string")
    df.write.format("skiff").mode("append").option("namesrvAddr", ns).save()
    assert sorted((m.body, mq) for mq, m in pull_all(ns, topic)) == \
        sorted((body, MessageQueue(topic, broker, qid)) for body, _, qid, broker in data)


@pytest.mark.parametrize("mode, columns, options, words", [
    ("overwrite", "body string", {}, "the skiff sink only appends"),
    ("append", "value string", {}, "the skiff sink has no column 'value'"),
    ("append", "tags string", {}, "needs a body column"),
    ("append", "body string", {"idempotent": "true"}, "needs a writeId option"),
    ("append", "body string", {"namesrvAddr": None}, "option namesrvAddr is required"),
])
def test_bad_writes_fail_with_a_clear_error(spark, cluster, mode, columns, options, words):
    df = spark.createDataFrame([("x",)], columns)
    options = {k: v for k, v in {"namesrvAddr": cluster.namesrv_addr, "topic": "T", **options}.items() if v}
    with spark_quiet(spark), pytest.raises(Exception) as err:
        df.write.format("skiff").mode(mode).options(**options).save()
    assert words in str(err.value)


def test_idempotent_stream_sends_the_same_ids_when_a_micro_batch_is_replayed(spark, cluster, tmp_path):
    ns = cluster.namesrv_addr
    source, sink = create_topic(ns, "replay-in", queues=2), create_topic(ns, "replay-out", queues=2)
    send(ns, [Message.of(source, f"event-{i}", tags="t") for i in range(30)])
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        stream = reader(spark, ns, source, stream=True, startingOffsets="earliest")
        query = stream.select(F.concat(F.lit("copy of "), F.col("body").cast("string")).alias("body"), "tags") \
            .writeStream.format("skiff").option("namesrvAddr", ns).option("topic", sink) \
            .option("idempotent", "true").option("checkpointLocation", str(checkpoint)) \
            .trigger(availableNow=True).start()
        finish(query)

    run()
    first = sorted(m.msg_id for _, m in pull_all(ns, sink))
    assert len(first) == 30
    for name in ("0", ".0.crc"):  # forget that micro-batch 0 was committed: Spark runs it again
        (checkpoint / "commits" / name).unlink()
    run()
    stored = pull_all(ns, sink)
    assert len(stored) == 60, "the replay sent the batch again (at-least-once)"
    assert sorted({m.msg_id for _, m in stored}) == first, "with the same ids, so consumers can drop them"
    assert sorted(m.body for _, m in stored) == sorted([f"copy of event-{i}".encode() for i in range(30)] * 2)

