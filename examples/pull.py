"""A lite pull consumer: assign queues, poll batches, commit when they are written.

    python examples/pull.py --namesrv 127.0.0.1:9876 --topic DemoPull --count 20

It sends ``--count`` messages, assigns every queue of the topic, reads from the
group's committed offsets (a new group starts at the first message) with
`poll`, commits after each batch, and shows each queue's committed offset at the
end: where the next run of this group starts, so it reads only what is new.
"""

from __future__ import annotations

import argparse
import time

from skiff.client import ConsumeFromWhere, LitePullConsumer, Message, Producer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoPull")
    parser.add_argument("--group", default="demo-pull-consumer")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()

    with Producer("demo-pull-producer", args.namesrv) as producer:
        producer.send_batch([Message.of(args.topic, f"record {i}") for i in range(args.count)])

    consumer = LitePullConsumer(args.group, args.namesrv, auto_commit=False,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    queues = consumer.fetch_message_queues(args.topic)
    consumer.assign(queues)
    got = 0
    with consumer:
        deadline = time.monotonic() + args.timeout_s
        while got < args.count and time.monotonic() < deadline:
            batch = consumer.poll(1000)
            for msg in batch:
                print(f"queue={msg.queue_id} offset={msg.queue_offset} body={msg.body.decode()}", flush=True)
            got += len(batch)
            if batch:
                consumer.commit_sync()
        for mq in queues:
            print(f"committed {mq}: {consumer.committed(mq)}", flush=True)
    print(f"polled {got} of {args.count} messages", flush=True)
    return 0 if got >= args.count else 1


if __name__ == "__main__":
    raise SystemExit(main())
