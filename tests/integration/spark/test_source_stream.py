"""spark.readStream.format("skiff"): micro-batches, restarts, admission control, new queues."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from skiff.client import Admin, Message, MessageQueue, Producer
from skiff.testing.waits import wait_for
from tests.integration.spark.kit import (
    batch_sizes,
    create_topic,
    finish,
    parquet_rows,
    reader,
    run_to_parquet,
    send,
    spark_quiet,
    topic_name,
)

pytestmark = pytest.mark.spark


class Sender(threading.Thread):
    """Sends to ``topic`` until stopped, a few messages at a time; ``ids`` holds what was stored."""

    def __init__(self, namesrv: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.namesrv, self.topic = namesrv, topic
        self.ids: list[str] = []
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer("spark-test-sender", self.namesrv) as producer:
                while not self.stopped.is_set():
                    self.ids.append(producer.send(Message.of(self.topic, f"live-{len(self.ids)}")).msg_id)
                    self.stopped.wait(0.02)  # pacing (about 50 messages/s), not synchronisation
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> list[str]:
        self.stopped.set()
        self.join(30)
        assert self.error is None, self.error
        return self.ids


def test_restarts_while_producing_give_every_message_exactly_once(spark, cluster, tmp_path):
    ns = cluster.namesrv_addr
    topic = create_topic(ns, "stream", queues=2)
    early = [r.msg_id for r in send(ns, [Message.of(topic, f"early-{i}") for i in range(250)])]
    sender = Sender(ns, topic)
    sender.start()
    stream = reader(spark, ns, topic, stream=True, startingOffsets="earliest", maxMessagesPerTrigger="100")

    running = run_to_parquet(stream, tmp_path, {"processingTime": "200 milliseconds"})
    wait_for(lambda: sum(batch_sizes(running)) >= 250 or running.exception(), timeout_s=90,
             what="the processing-time query reading 250 messages")
    with spark_quiet(spark):  # a stop in the middle of a Parquet write logs a harmless abort
        running.stop()
    assert running.exception() is None
    first = batch_sizes(running)

    second = finish(run_to_parquet(stream, tmp_path))  # restarted from the checkpoint, the sender still going
    live = sender.stop()
    rest = finish(run_to_parquet(reader(spark, ns, topic, stream=True), tmp_path))

    assert max(first + second) <= 100 and len(first) >= 3, (first, second)
    ids = [r.msg_id for r in parquet_rows(spark, tmp_path)]
    assert len(ids) == len(set(ids)), "a message was written twice"
    assert sorted(ids) == sorted(early + live)
    assert sum(first + second + rest) == len(ids)


def last_offsets(checkpoint: Path, batch: int) -> dict:
    """The source offsets Spark logged for micro-batch ``batch``."""
    return json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])


def test_new_topics_queues_and_brokers_start_at_their_earliest_offset(spark, cluster, tmp_path):
    ns = cluster.namesrv_addr
    prefix = topic_name("grow")
    old = create_topic(ns, prefix, queues=2, broker_addr=cluster.broker_addr(0))
    send(ns, [Message.of(old, f"before-{i}") for i in range(10)])  # before the query: skipped (latest)
    stream = reader(spark, ns, None, stream=True, topicPattern=f"{prefix}.*", startingOffsets="latest",
                    maxMessagesPerTrigger="7", consumerGroup="spark-grow")
    assert finish(run_to_parquet(stream, tmp_path)) == []

    with Admin(ns) as admin:
        admin.create_topic(old, queue_nums=3, broker_addr=cluster.broker_addr(0))  # one more queue
        admin.create_topic(old, queue_nums=2, broker_addr=cluster.broker_addr(1))  # a new broker
    new = create_topic(ns, prefix, queues=1)  # a new topic, on both brokers
    queues = [MessageQueue(old, "broker-a", i) for i in range(3)] + [MessageQueue(old, "broker-b", i) for i in range(2)]
    queues += [MessageQueue(new, b, 0) for b in ("broker-a", "broker-b")]
    after = [r.msg_id for mq in queues
             for r in send(ns, [Message.of(mq.topic, f"after-{mq}-{i}") for i in range(3)], queue=mq)]
    sizes = finish(run_to_parquet(stream, tmp_path))

    assert sorted(r.msg_id for r in parquet_rows(spark, tmp_path)) == sorted(after)
    assert max(sizes) <= 7 and sum(sizes) == len(after)
    # commit(end) of a micro-batch runs when Spark plans the next one: the group lags one batch
    last = max(int(p.name) for p in (tmp_path / "checkpoint" / "offsets").iterdir() if p.name.isdigit())
    lagging = last_offsets(tmp_path / "checkpoint", last - 1)
    with Admin(ns) as admin:
        committed = {f"{mq.topic}/{mq.broker_name}/{mq.queue_id}": admin.fetch_consumer_offset("spark-grow", mq)
                     for mq in queues}
    assert committed == {f"{t}/{b}/{q}": off for t, brokers in lagging.items() for b, qs in brokers.items()
                         for q, off in qs.items()}
