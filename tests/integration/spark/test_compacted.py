"""spark.read on a compacted topic: the gaps compaction leaves are not data loss, and the
docs' latest-per-key query (a window over key and offset) gives the model's table."""

from __future__ import annotations

import pytest

from skiff.client import Admin, Message, Producer, SelectByHash
from skiff.testing.waits import wait_for
from tests.integration.spark.kit import reader, topic_name

pytestmark = pytest.mark.spark

KEYS = 6


def test_a_compacted_topic_reads_as_a_latest_per_key_table(spark, cluster):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ns = cluster.namesrv_addr
    topic = topic_name("compacted")
    with Admin(ns) as admin:
        admin.create_topic(topic, queue_nums=2, attributes={"cleanup.policy": "COMPACTION"})
    messages = [Message.of(topic, f"v{i}", keys=f"k{i % KEYS}") for i in range(60)]
    messages.append(Message.of(topic, b"", keys="k5"))  # a tombstone: k5 is deleted
    with Producer("spark-compacted-producer", ns) as producer:  # a key stays on one queue
        for m in messages:
            producer.send(m, selector=SelectByHash(), arg=m.keys[0])
    with Admin(ns) as admin:
        def all_cleaned() -> list | None:  # compaction covers what is flushed (every 500 ms)
            answers = admin.compaction(topic, run=True)
            assert answers and all(b.error is None for b in answers), answers
            done = all(q.cleaned_offset == q.max_offset for b in answers for q in b.state.queues)
            return answers if done else None

        answers = wait_for(all_cleaned, 30, "every queue compacted to its end")
    kept = sum(q.segment_records for b in answers for q in b.state.queues)
    assert kept < len(messages)  # offsets have gaps now

    rows = reader(spark, ns, topic).collect()  # failOnDataLoss is on: gaps must not count as loss
    assert len(rows) == kept

    # the recipe of docs/spark.md ("Compacted topics")
    df = reader(spark, ns, topic)
    newest_first = Window.partitionBy("keys").orderBy(F.col("queue_offset").desc())
    table = (df.withColumn("rank", F.row_number().over(newest_first))
               .where("rank = 1 AND length(body) > 0")
               .select("keys", F.col("body").cast("string").alias("value")))
    want = {f"k{i % KEYS}": f"v{i}" for i in range(60)}
    del want["k5"]
    assert {r["keys"]: r["value"] for r in table.collect()} == want
