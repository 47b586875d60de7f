"""The admin API: create a topic, look at its queues, and at a consumer group's lag.

    python examples/admin.py --namesrv 127.0.0.1:9876 --topic DemoTopic --group demo-push-consumer

The same questions, from a shell: ``skiff topic status -t DemoTopic`` and
``skiff consumer progress -g demo-push-consumer`` (docs/cli.md).
"""

from __future__ import annotations

import argparse

from skiff.client import Admin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--topic", default="DemoTopic")
    parser.add_argument("--group", default="demo-push-consumer")
    args = parser.parse_args()

    with Admin(args.namesrv) as admin:
        for broker in admin.brokers():
            print(f"broker {broker.broker_name} (id {broker.broker_id}) at {broker.addr}, {broker.version}")
        print("created on", ", ".join(admin.create_topic(args.topic, queue_nums=4)))
        for q in admin.topic_status(args.topic):
            print(f"queue {q.mq.broker_name}:{q.mq.queue_id} offsets {q.min_offset}..{q.max_offset}")
        progress = admin.consumer_progress(args.group, args.topic)
        for row in progress.queues:
            print(f"group {args.group} queue {row.mq.broker_name}:{row.mq.queue_id} lag {row.lag}")
        print(f"total lag {progress.total_lag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
