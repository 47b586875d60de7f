"""Retention removes messages under a running query: failOnDataLoss decides what happens.

The broker here deletes every CommitLog file but the newest as soon as it may
(fileReservedTime=0, every hour a deletion hour, a pass every 100 ms) and its
files hold 64 KiB. The query's first micro-batch reads a few messages; while it
is in the sink, the test sends enough to fill several files and waits until
retention has deleted all but the last; the next micro-batch then starts below
the queue's new minimum offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from skiff.client import Admin, Message, MessageQueue
from skiff.common.msgid import decode_offset_msg_id
from skiff.testing.cluster import Cluster
from skiff.testing.waits import wait_for
from tests.integration.spark.kit import QUERY_TIMEOUT_S, create_topic, reader, send, spark_quiet

pytestmark = pytest.mark.spark

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
RETAIN_NEWEST_FILE_ONLY = ["--fileReservedTime=0", f"--deleteWhen={EVERY_HOUR}", "--cleanResourceInterval=100",
                           "--mappedFileSizeCommitLog=65536"]
FIRST = 5
BODY = b"r" * 1000


@pytest.fixture
def retaining(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh broker per test, so the first messages sit at the start of its first file."""
    with Cluster(tmp_path / "cluster", broker_args=RETAIN_NEWEST_FILE_ONLY) as running:
        yield running


class Scenario:
    """A topic of one queue, FIRST messages in it, and the sink that lets retention strike after batch 0."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.ns = cluster.namesrv_addr
        self.topic = create_topic(self.ns, "retained", queues=1)
        self.mq = MessageQueue(self.topic, "broker-a", 0)
        self.sent = send(self.ns, [Message.of(self.topic, BODY) for _ in range(FIRST)], queue=self.mq)
        self.seen: list[str] = []
        self.low: int | None = None

    def sink(self, batch, batch_id: int) -> None:
        self.seen.extend(r.msg_id for r in batch.select("msg_id").collect())
        if batch_id == 0:
            for _ in range(8):  # 160 KiB: two and a half files
                self.sent += send(self.ns, [Message.of(self.topic, BODY) for _ in range(20)], queue=self.mq)
            with Admin(self.ns) as admin:
                self.low = wait_for(lambda: self._settled(admin), timeout_s=60,
                                    what="retention deleting all but the newest file")

    def _settled(self, admin: Admin) -> int | None:
        """The queue's minimum once retention has left one file and moved the minimum to its first message."""
        files = list((self.cluster.store_dir(0) / "commitlog").iterdir())
        if len(files) != 1:
            return None
        start = int(files[0].name)
        low = min(r.queue_offset for r in self.sent if decode_offset_msg_id(r.offset_msg_id).physical_offset >= start)
        return low if admin.min_offset(self.mq) == low else None

    def start(self, spark, fail_on_data_loss: str):
        stream = reader(spark, self.ns, self.topic, stream=True, startingOffsets="earliest",
                        failOnDataLoss=fail_on_data_loss)
        return stream.writeStream.foreachBatch(self.sink).trigger(processingTime="100 milliseconds").start()


def test_fail_on_data_loss_stops_the_query_naming_queue_and_offsets(spark, retaining):
    scenario = Scenario(retaining)
    with spark_quiet(spark), pytest.raises(StreamingQueryException) as failure:
        scenario.start(spark, "true").awaitTermination(QUERY_TIMEOUT_S)
    low = scenario.low
    assert low is not None and low > FIRST
    assert scenario.seen == [r.msg_id for r in scenario.sent[:FIRST]]
    text = str(failure.value)
    assert f"topic {scenario.topic}, broker broker-a, queue 0: the query needs offset {FIRST} but the earliest " \
           f"offset left is {low}" in text, text
    assert "failOnDataLoss=false" in text


def test_without_fail_on_data_loss_the_query_skips_the_gap(spark, retaining):
    scenario = Scenario(retaining)
    query = scenario.start(spark, "false")
    try:
        low = wait_for(lambda: scenario.low or query.exception(), timeout_s=90, what="retention under the query")
        assert query.exception() is None
        left = [r.msg_id for r in scenario.sent if r.queue_offset < FIRST or r.queue_offset >= low]
        wait_for(lambda: len(scenario.seen) >= len(left) or query.exception(), timeout_s=60,
                 what="the query reading what retention left")
    finally:
        query.stop()
    assert query.exception() is None
    assert scenario.seen == left
    assert len(left) < len(scenario.sent)
