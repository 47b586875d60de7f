"""Sending with the producer: plain, ordered per key, in a batch, async and oneway.

    python examples/send.py --namesrv 127.0.0.1:9876 --topic DemoTopic

Each send prints its result: status, the message id (UNIQ_KEY), the broker's
offset id, the queue and the offset in it. The ordered sends go through
SelectByHash, so every message of one order lands in one queue, in order.
"""

from __future__ import annotations

import argparse

from skiff.client import Message, Producer, SelectByHash, SendResult


def show(what: str, result: SendResult) -> None:
    mq = result.message_queue
    print(f"{what:8} {result.send_status.name} id={result.msg_id} offset_id={result.offset_msg_id} "
          f"queue={mq.broker_name}:{mq.queue_id} offset={result.queue_offset}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoTopic")
    args = parser.parse_args()

    with Producer("demo-producer", args.namesrv) as producer:
        # One message with a tag, business keys and a user property.
        show("plain", producer.send(Message.of(args.topic, "hello", tags="TagA", keys=["order-1", "user-7"],
                                               properties={"region": "eu"})))

        # Ordered: each order's steps go to the queue its id hashes to, one after the other.
        for step in ("created", "paid", "shipped"):
            for order in ("order-1", "order-2"):
                result = producer.send(Message.of(args.topic, f"{order} {step}", tags=step, keys=order),
                                       selector=SelectByHash(), arg=order)
                show("ordered", result)

        # A batch: one request for many messages of one topic (split if it outgrows the limits).
        for result in producer.send_batch([Message.of(args.topic, f"batch {i}", tags="TagB") for i in range(10)]):
            print(f"batch    {result.send_status.name} {len(result.msg_ids)} messages "
                  f"queue={result.message_queue.broker_name}:{result.message_queue.queue_id} "
                  f"first offset={result.queue_offset}", flush=True)

        # Async: the future completes when the broker answers; oneway: no answer at all.
        future = producer.send_async(Message.of(args.topic, "async hello", tags="TagA"))
        show("async", future.result(timeout=10))
        producer.send_oneway(Message.of(args.topic, "oneway hello", tags="TagA"))
        print("oneway   sent", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
