"""Kafka-client load: ``skiff bench kafka`` — the broker's CPU per message for the same load
through its Kafka listener and through Skiff's own (RocketMQ remoting) protocol.

Four phases against one broker this bench starts (a NameServer and a broker with its Kafka
listener, child processes, a temporary store), each on its own topic:

1. kafka produce: librdkafka's producer (confluent-kafka) with its defaults (linger 5 ms,
   batches up to 1 MB, acks=all), ``--size``-byte messages for ``--seconds``, then flushed;
2. kafka consume: librdkafka's consumer reads every message back from offset 0;
3. skiff produce: Skiff's producer sends batches of ``--skiff-batch`` messages of the same
   size from ``--threads`` threads for ``--seconds``;
4. skiff consume: Skiff's lite pull consumer reads every message back.

Each phase prints the rate and the broker's CPU microseconds per message (its process's
user + system time over the phase, divided by the messages), the figure the issue's target
is set on: Kafka within 1.5× of Skiff's own protocol.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from skiff.bench.producer import _ProcessCpu

PARTITIONS = 8
CONSUME_TIMEOUT_S = 120.0
"""Longest a consume phase reads before it gives up (it reports what it read)."""

ONE_PER_REQUEST = {"linger.ms": 0, "batch.num.messages": 1}
"""librdkafka settings for one message per request (``skiff bench compare``'s single shape):
no lingering, and a partition's batch capped at one record. librdkafka sends each partition's
batch in its own ProduceRequest, so every request carries one record, as a RocketMQ
application's ``send(msg)`` does; the messages in flight are the caller's window."""


def producer_config(bootstrap: str, *, one_per_request: bool = False) -> dict[str, object]:
    """librdkafka's producer with its defaults (linger 5 ms, batches up to 1 MB, acks=all),
    or one record per request; the one configuration both Kafka benches use."""
    return {"bootstrap.servers": bootstrap, **(ONE_PER_REQUEST if one_per_request else {})}


def consumer_config(bootstrap: str, group: str) -> dict[str, object]:
    """librdkafka's consumer with its defaults; partitions are assigned from offset 0 by the
    caller and nothing is committed (the benches read a topic once)."""
    return {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}


def assign_from_start(consumer: Consumer, topic: str, partitions: int) -> None:
    """Read every partition of ``topic`` from offset 0 (no group coordination needed)."""
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])


@dataclass(frozen=True, slots=True)
class Row:
    phase: str
    messages: int
    seconds: float
    rate: float
    broker_cpu_us_per_msg: float


def _timed(name: str, cpu: _ProcessCpu, run: Callable[[], int]) -> Row:
    cpu.mark()
    start = time.monotonic()
    n = run()
    seconds = time.monotonic() - start
    used = cpu.since_mark() or 0.0
    return Row(name, n, round(seconds, 2), round(n / seconds, 1), round(used * 1e6 / max(1, n), 2))


def kafka_produce(bootstrap: str, topic: str, size: int, seconds: float, limit: int) -> int:
    delivered = 0
    failed: list[str] = []

    def done(err: object, msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            failed.append(str(err))

    producer = Producer(producer_config(bootstrap))
    body = b"k" * size
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end and i < limit:
        try:
            producer.produce(topic, body, partition=i % PARTITIONS, on_delivery=done)
            i += 1
        except BufferError:  # the client's queue is full: let it deliver
            producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(60) or failed:
        raise SystemExit(f"kafka produce: {len(failed)} failed ({failed[:1]}), {len(producer)} undelivered")
    return delivered


def kafka_consume(bootstrap: str, topic: str, expected: int, timeout_s: float) -> int:
    consumer = Consumer(consumer_config(bootstrap, "bench-kafka"))
    assign_from_start(consumer, topic, PARTITIONS)
    got = 0
    deadline = time.monotonic() + timeout_s
    try:
        while got < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                got += 1
    finally:
        consumer.close()
    return got


def skiff_produce(namesrv: str, topic: str, size: int, seconds: float, batch: int, threads: int,
                  limit: int) -> int:
    from skiff.client import Message
    from skiff.client import Producer as SkiffProducer

    sent = [0] * threads
    body = b"s" * size
    with SkiffProducer("bench-kafka-compare", namesrv) as producer:
        end = time.monotonic() + seconds

        def work(k: int) -> None:
            while time.monotonic() < end and sum(sent) < limit:
                for result in producer.send_batch([Message.of(topic, body) for _ in range(batch)]):
                    sent[k] += len(result.msg_ids)

        workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    return sum(sent)


def skiff_consume(namesrv: str, topic: str, expected: int, timeout_s: float) -> int:
    from skiff.client import ConsumeFromWhere, LitePullConsumer

    consumer = LitePullConsumer("bench-kafka-compare", namesrv, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.assign(consumer.fetch_message_queues(topic))
    got = 0
    deadline = time.monotonic() + timeout_s
    with consumer:
        while got < expected and time.monotonic() < deadline:
            got += len(consumer.poll(500))
    return got


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench kafka", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--seconds", type=float, default=10.0, help="of each produce phase (default 10)")
    parser.add_argument("--skiff-batch", type=int, default=64, help="messages per Skiff send (default 64)")
    parser.add_argument("--threads", type=int, default=4, help="Skiff producer threads (default 4)")
    parser.add_argument("--messages", type=int, default=0, help="stop each produce phase after about this many "
                                                                 "(default 0: no limit but --seconds)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    args = parser.parse_args(argv)
    from skiff.testing.cluster import Cluster
    from skiff.testing.processes import free_port

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="skiff-bench-kafka-") as root, \
            Cluster(root, broker_args=[f"--kafkaListenPort={port}", f"--defaultTopicQueueNums={PARTITIONS}",
                                       "--flushDiskType=ASYNC_FLUSH"]) as cluster:
        bootstrap, namesrv = f"127.0.0.1:{port}", cluster.namesrv_addr
        cpu = _ProcessCpu(cluster.broker(0).pid)
        rows: list[Row] = []
        limit = args.messages or 1 << 62
        drain_s = max(CONSUME_TIMEOUT_S, args.seconds * 6)
        rows.append(_timed("kafka produce", cpu, lambda: kafka_produce(bootstrap, "bench-kafka", args.size,
                                                                       args.seconds, limit)))
        rows.append(_timed("kafka consume", cpu, lambda: kafka_consume(bootstrap, "bench-kafka", rows[0].messages,
                                                                       drain_s)))
        rows.append(_timed("skiff produce", cpu, lambda: skiff_produce(namesrv, "bench-skiff", args.size, args.seconds,
                                                                       args.skiff_batch, args.threads, limit)))
        rows.append(_timed("skiff consume", cpu, lambda: skiff_consume(namesrv, "bench-skiff", rows[2].messages,
                                                                       drain_s)))
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    for r in rows:
        print(f"{r.phase:14} {r.messages:>9,} msgs in {r.seconds:6.2f} s  {r.rate:>10,.0f} msg/s  "
              f"broker {r.broker_cpu_us_per_msg:7.2f} us CPU/msg", flush=True)
    for what in ("produce", "consume"):
        k, s = (next(r for r in rows if r.phase == f"{side} {what}") for side in ("kafka", "skiff"))
        ratio = (f"{k.broker_cpu_us_per_msg / s.broker_cpu_us_per_msg:.2f}" if s.broker_cpu_us_per_msg > 0
                 else "n/a (Skiff's phase used less than one 10 ms CPU tick: give it more messages)")
        print(f"{what}: Kafka / Skiff broker CPU per message = {ratio}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
