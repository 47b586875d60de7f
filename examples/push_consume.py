"""A push consumer: subscribe with a tag expression and let the client call you.

    python examples/push_consume.py --namesrv 127.0.0.1:9876 --topic DemoTopic --count 10

It sends ``--count`` messages tagged TagA and TagB, then consumes the TagA ones
with a concurrent listener and prints each; it exits once all of them arrived
(or after ``--timeout-s``). A second run with the same group resumes where the
first committed: the consumer group remembers its offsets on the broker.
"""

from __future__ import annotations

import argparse
import threading

from skiff.client import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoTopic")
    parser.add_argument("--group", default="demo-push-consumer")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    with Producer("demo-producer", args.namesrv) as producer:
        for i in range(args.count):
            tag = "TagA" if i % 2 == 0 else "TagB"
            producer.send(Message.of(args.topic, f"hello {i}", tags=tag, keys=f"key-{i}"))
    expected = (args.count + 1) // 2

    received: set[str] = set()
    lock = threading.Lock()
    done = threading.Event()

    def on_messages(msgs, ctx):  # a plain function: several run at once on the consumer's threads
        with lock:
            for msg in msgs:
                print(f"{msg.topic} {msg.tags} {msg.keys} queue={msg.queue_id} offset={msg.queue_offset} "
                      f"body={msg.body.decode()}", flush=True)
                received.add(msg.msg_id)
            if len(received) >= expected:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(args.group, args.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(args.topic, "TagA")
    consumer.register_listener(on_messages)
    with consumer:
        finished = done.wait(args.timeout_s)
    print(f"received {len(received)} of {expected} TagA messages", flush=True)
    return 0 if finished else 1


if __name__ == "__main__":
    raise SystemExit(main())
