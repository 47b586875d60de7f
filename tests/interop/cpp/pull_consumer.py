"""Pull with the RocketMQ C++ client's pull consumer until ``expected`` messages arrive.

Run by tests/interop with that package's interpreter: ``python pull_consumer.py SPEC_JSON``.
SPEC: {"namesrv", "group", "topic", "expression"?, "expected", "timeout_s"?, "props"?: [names]}
Prints {"messages": [{"id", "body", "tags", "keys", "queue_id", "queue_offset", "props"}]}.
"""

import json
import sys
import time

from rocketmq.client import PullConsumer

from helpers import text


def main():
    spec = json.loads(sys.argv[1])
    consumer = PullConsumer(spec["group"])
    consumer.set_namesrv_addr(spec["namesrv"])
    if spec.get("credentials"):  # [access_key, secret_key, channel]: sign requests (plain ACL)
        consumer.set_session_credentials(*spec["credentials"])
    consumer.start()
    got = []
    deadline = time.time() + spec.get("timeout_s", 20)
    try:
        while len(got) < spec["expected"] and time.time() < deadline:
            for msg in consumer.pull(spec["topic"], spec.get("expression", "*")):
                got.append({"id": msg.id, "body": text(msg.body), "tags": text(msg.tags), "keys": text(msg.keys),
                            "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
                            "props": {n: text(msg.get_property(n)) for n in spec.get("props", [])}})
            if len(got) < spec["expected"]:
                time.sleep(0.05)
    finally:
        consumer.shutdown()
    print(json.dumps({"messages": got}))


if __name__ == "__main__":
    main()
