"""One topic, two protocols: a Kafka producer's messages read by a RocketMQ consumer.

    skiff up
    python examples/kafka_to_rocketmq.py --bootstrap 127.0.0.1:9092 --namesrv 127.0.0.1:9876

A Kafka producer (confluent-kafka) sends ``--count`` messages with a key and a header;
Skiff's RocketMQ push consumer reads them from the same topic: the key is the message's
KEYS, the header a user property. A team can move one application at a time.
"""

from __future__ import annotations

import argparse
import threading
import time

from confluent_kafka import Producer as KafkaProducer

from skiff.client import ConsumeFromWhere, ConsumeStatus, PushConsumer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoBridge")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    run = str(time.time_ns())
    producer = KafkaProducer({"bootstrap.servers": args.bootstrap, "acks": "all"})
    for i in range(args.count):
        producer.produce(args.topic, key=f"order-{i}", value=f"kafka says {i}", headers=[("run", run)])
    if producer.flush(args.timeout_s):
        print("some messages were not acknowledged", flush=True)
        return 1

    received = 0
    lock = threading.Lock()
    done = threading.Event()

    def on_messages(msgs, ctx):
        nonlocal received
        with lock:
            for msg in msgs:
                if msg.properties.get("run") != run:
                    continue  # an earlier run's message
                received += 1
                print(f"queue={msg.queue_id} offset={msg.queue_offset} keys={msg.keys} "
                      f"run={msg.properties['run']} body={msg.body.decode()}", flush=True)
            if received >= args.count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("demo-bridge-consumer", args.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(args.topic, "*")
    consumer.register_listener(on_messages)
    with consumer:
        finished = done.wait(args.timeout_s)
    print(f"all {received} arrived" if finished else f"only {received} of {args.count} arrived", flush=True)
    return 0 if finished else 1


if __name__ == "__main__":
    raise SystemExit(main())
