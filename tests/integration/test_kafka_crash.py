"""A broker killed (SIGKILL) under an idempotent librdkafka producer with acks=all: the
producer retries through the restart, every message it was told is stored is stored,
and the partitions hold each message once (a batch stored before the kill and retried
after it is recognised by the producer state read back at the restart), in the order
sent per partition."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from skiff.testing.waits import wait_for
from tests.integration.kafka_kit import kafka_cluster

PARTITIONS = 2
TOPIC = "crash-topic"


def test_killed_broker_loses_nothing_acknowledged(tmp_path: Path) -> None:
    # SYNC_FLUSH: acks=all answers after the fsync, so the kill often falls between a batch's
    # append and its answer, and librdkafka retries a batch the restarted broker has stored
    with kafka_cluster(tmp_path, f"--defaultTopicQueueNums={PARTITIONS}", "--flushDiskType=SYNC_FLUSH") as (
            cluster, bootstrap):
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 2, "message.timeout.ms": 60_000, "reconnect.backoff.max.ms": 200})
        acked: list[tuple[int, int, bytes]] = []
        lock = threading.Lock()

        def delivered(err, msg) -> None:
            if err is None:
                with lock:
                    acked.append((msg.partition(), msg.offset(), msg.value()))

        sent = 0
        stop = threading.Event()

        def produce() -> None:
            nonlocal sent
            while not stop.is_set():
                producer.produce(TOPIC, f"m-{sent:06d}".encode(), partition=sent % PARTITIONS, on_delivery=delivered)
                sent += 1
                producer.poll(0.001)

        worker = threading.Thread(target=produce)
        worker.start()
        try:
            wait_for(lambda: len(acked) >= 100, 30, "100 acknowledged before the kill")
            cluster.kill_broker(0)
            before = len(acked)
            cluster.start_broker(0)
            wait_for(lambda: len(acked) >= before + 100, 60, "100 more acknowledged after the restart")
        finally:
            stop.set()
            worker.join()
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check", "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        stored: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 30
        try:  # everything the partitions hold, to their ends
            ends = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)]
            while len(stored) < sum(ends) and time.monotonic() < deadline:
                for msg in consumer.consume(500, 0.5):
                    if msg.error() is None:
                        stored[(msg.partition(), msg.offset())] = msg.value()
        finally:
            consumer.close()
    assert len(acked) == sent  # flushed: every message was acknowledged in the end
    missing = [(p, o, v) for p, o, v in acked if stored.get((p, o)) != v]
    assert not missing, f"{len(missing)} acknowledged messages are not where their acknowledgement said: {missing[:3]}"
    assert len(stored) == sum(ends) == len(acked), f"{sum(ends)} stored for {len(acked)} acknowledged"
    assert len(set(stored.values())) == len(stored), "a message is stored twice"
    for p in range(PARTITIONS):  # each partition holds the messages sent to it, in the order sent
        values = [v for (q, _), v in sorted(stored.items()) if q == p]
        assert values == sorted(values)
