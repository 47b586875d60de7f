"""The source's default pull size (1024, issue 26): a read without pullBatchSize gets the bulk
path and still reads every message exactly once, where the broker's byte cap (1 MiB) cuts each
1024-offset segment's answers short and the task pulls on from where an answer ended."""

from __future__ import annotations

import pytest

from skiff.client import Message, Producer
from skiff.spark.options import DEFAULT_PULL_BATCH_SIZE, SourceOptions
from tests.integration.spark.kit import create_topic, reader

pytestmark = pytest.mark.spark

BODY_BYTES = 1500
"""Large enough that 1024 of them (1.5 MiB) pass the broker's 1 MiB per answer."""
COUNT = 2600


def test_the_default_batch_is_the_bulk_one_and_reads_every_message_once(spark, cluster):
    assert DEFAULT_PULL_BATCH_SIZE == 1024
    assert SourceOptions.parse({"namesrvAddr": "h:1", "topic": "T"}).pull_batch_size == 1024
    ns = cluster.namesrv_addr
    topic = create_topic(ns, "default-batch", queues=1, broker_addr=cluster.broker_addr(0))
    messages = [Message.of(topic, f"{i:08d}".encode() + bytes(BODY_BYTES - 8)) for i in range(COUNT)]
    with Producer("spark-test-producer", ns) as producer:  # batches: a sync send each would take seconds
        results = [r for i in range(0, COUNT, 200) for r in producer.send_batch(messages[i : i + 200])]
    assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    rows = reader(spark, ns, topic).select("queue_id", "queue_offset", "body").collect()
    assert len(rows) == COUNT
    numbers = sorted(int(bytes(r.body[:8])) for r in rows)
    assert numbers == list(range(COUNT))  # every message, none twice
    assert sorted(r.queue_offset for r in rows) == list(range(COUNT))
