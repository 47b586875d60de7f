"""Ordered messages: send each order's events to one queue, consume them in order.

    python examples/orderly.py --namesrv 127.0.0.1:9876 --topic DemoOrders --orders 4 --steps 5

The producer picks the queue by hashing the order id, so all events of an order
land in one queue in send order; the orderly listener gets each queue's messages
one batch at a time, in offset order (the queue is locked on its broker for this
consumer). It prints each order's steps as they arrive and checks their order.
"""

from __future__ import annotations

import argparse
import threading
from collections import defaultdict

from skiff.client import (
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Message,
    Producer,
    PushConsumer,
    SelectByHash,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoOrders")
    parser.add_argument("--group", default="demo-orderly-consumer")
    parser.add_argument("--orders", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    with Producer("demo-orderly-producer", args.namesrv) as producer:
        for step in range(args.steps):
            for order in range(args.orders):
                order_id = f"order-{order}"
                producer.send(Message.of(args.topic, f"{order_id} step {step}", keys=order_id),
                              selector=SelectByHash(), arg=order_id)

    steps: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()
    done = threading.Event()

    def on_messages(msgs, ctx):  # one queue never twice at once; different queues in parallel
        with lock:
            for msg in msgs:
                order_id, _, step = msg.body.decode().rpartition(" step ")
                steps[order_id].append(int(step))
                print(f"{ctx.message_queue} offset={msg.queue_offset} {msg.body.decode()}", flush=True)
            if sum(len(s) for s in steps.values()) >= args.orders * args.steps:
                done.set()
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(args.group, args.namesrv,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(args.topic, "*")
    consumer.register_orderly_listener(on_messages)
    with consumer:
        finished = done.wait(args.timeout_s)
    in_order = all(s == sorted(s) for s in steps.values())
    print(f"{len(steps)} orders, every one in order: {in_order}", flush=True)
    return 0 if finished and in_order else 1


if __name__ == "__main__":
    raise SystemExit(main())
