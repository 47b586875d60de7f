"""A Kafka client against Skiff: confluent-kafka's producer and a consumer group, unchanged.

    skiff up                       # serves Kafka on 127.0.0.1:9092 too
    python examples/kafka_produce_consume.py --bootstrap 127.0.0.1:9092 --topic DemoKafka

It produces ``--count`` keyed messages with a header (acks=all, idempotent, zstd), then
reads them back in a consumer group that commits its offsets to the broker: run it twice
with the same ``--group`` and the second run reads only the second run's messages.
(``--namesrv`` is accepted and unused, so every example takes the same arguments.)
"""

from __future__ import annotations

import argparse
import time

from confluent_kafka import Consumer, Producer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoKafka")
    parser.add_argument("--group", default="demo-kafka-group")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    run = str(time.time_ns())
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": True,
                         "compression.type": "zstd"})
    for i in range(args.count):
        producer.produce(args.topic, key=f"user-{i % 3}", value=f"event {i} of run {run}",
                         headers=[("run", run)])
    if producer.flush(args.timeout_s):
        print("some messages were not acknowledged", flush=True)
        return 1

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([args.topic])
    seen = 0
    deadline = time.monotonic() + args.timeout_s
    try:
        while seen < args.count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            headers = dict(msg.headers() or [])
            if headers.get("run") == run.encode():
                seen += 1
            print(f"partition={msg.partition()} offset={msg.offset()} key={msg.key().decode()} "
                  f"value={msg.value().decode()}", flush=True)
            consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()
    print(f"all {seen} arrived" if seen == args.count else f"only {seen} of {args.count} arrived", flush=True)
    return 0 if seen == args.count else 1


if __name__ == "__main__":
    raise SystemExit(main())
