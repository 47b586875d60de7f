"""A 5.x SimpleConsumer that stays online: the official RocketMQ 5.x Python client
(rocketmq-python-client 5.1.2) receives ``take`` messages of a group's backlog without
acknowledging them, prints one JSON line (its client id and what it received), and keeps its
session open until its stdin closes; so a test can look at the group while the consumer is a
member with messages in flight. Run under SKIFF_RMQ5_PYTHON.

Usage: holder.py SPEC_JSON, SPEC = {"endpoint", "group", "topic", "take", "invisible_s"}.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

SPEC = json.loads(sys.argv[1])
DEADLINE_S = 30


def main() -> None:
    consumer = SimpleConsumer(ClientConfiguration(SPEC["endpoint"], Credentials()), SPEC["group"],
                              {SPEC["topic"]: FilterExpression()}, await_duration=2)
    consumer.startup()
    got, end = [], time.time() + DEADLINE_S
    while len(got) < SPEC["take"] and time.time() < end:
        got += consumer.receive(SPEC["take"] - len(got), SPEC["invisible_s"])
    print(json.dumps({"client_id": consumer.client_id, "bodies": [m.body.decode() for m in got]}), flush=True)
    sys.stdin.read()  # online, holding them, until the test is done
    consumer.shutdown()


if __name__ == "__main__":
    main()
