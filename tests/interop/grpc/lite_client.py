"""Lite topic scenarios (RocketMQ 5.5, RIP-83) of the official RocketMQ 5.x Python client (PyPI
rocketmq-python-client 5.1.2) against Skiff's gRPC endpoint; run under that client's own
interpreter (SKIFF_RMQ5_PYTHON), as tests/interop/grpc/client.py.

Usage: lite_client.py SPEC_JSON, SPEC = {"endpoint": "host:port", "scenarios": [names...], "parent": topic,
"wildcard_group": group, "group": group, "count": lite topics}. Prints one JSON object: scenario name ->
what it saw (the test asserts on it).
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, LitePushConsumer, LiteSimpleConsumer, Message,
                      MessageListener, Producer)

SPEC = json.loads(sys.argv[1])
CFG = ClientConfiguration(SPEC["endpoint"], Credentials())
PARENT = SPEC["parent"]
DEADLINE_S = 60


def lite_message(lite, body):
    m = Message()
    m.topic, m.body = PARENT, body
    m.lite_topic = lite
    return m


def send(pairs):
    """Send (lite topic, body) pairs; their message ids."""
    p = Producer(CFG, (PARENT,))
    p.startup()
    try:
        return [p.send(lite_message(lite, body.encode())).message_id for lite, body in pairs]
    finally:
        p.shutdown()


class Recorder(MessageListener):
    def __init__(self):
        self.got = []
        self.lock = threading.Lock()

    def consume(self, m):
        with self.lock:
            self.got.append({"lite": m.lite_topic, "body": m.body.decode(), "id": m.message_id, "topic": m.topic,
                             "attempt": m.delivery_attempt})
        return ConsumeResult.SUCCESS


def push_wildcard():
    """A LitePushConsumer of a wildcard group: subscribe_lite_all (a COMPLETE_ADD) and every message of
    ``count`` lite topics (3 each) arrives; what the client's quota was."""
    n = SPEC["count"]
    pairs = [(f"lite-{i}", f"{i}:{k}") for k in range(3) for i in range(n)]
    sent = send(pairs)
    listener = Recorder()
    c = LitePushConsumer(CFG, SPEC["wildcard_group"], PARENT, listener)
    c.startup()
    try:
        c.subscribe_lite_all()
        end = time.time() + DEADLINE_S
        while time.time() < end:
            with listener.lock:
                if len({g["id"] for g in listener.got}) >= len(sent):
                    break
            time.sleep(0.2)
        with listener.lock:
            return {"sent": sent, "got": list(listener.got)}
    finally:
        c.shutdown()


def simple_split_name():
    """A LiteSimpleConsumer's subscribe_lite, which 5.1.2 sends split into characters until its 30 s
    resync: how soon its messages came, and that only the one lite topic's did."""
    send([("py-lite-topic", f"b{k}") for k in range(3)] + [("p", "not-mine"), ("y", "not-mine")])
    c = LiteSimpleConsumer(PARENT, CFG, SPEC["group"], await_duration=2)
    c.startup()
    try:
        # startup does not wait for the Settings reply, and subscribe_lite raises while the quota is 0
        manager, end = c._LiteSimpleConsumer__subscription_manager, time.time() + DEADLINE_S
        while manager.lite_subscription_quota == 0 and time.time() < end:
            time.sleep(0.05)
        quota = manager.lite_subscription_quota
        started = time.time()
        c.subscribe_lite("py-lite-topic")
        got, first_at, end = [], None, started + DEADLINE_S
        while len(got) < 3 and time.time() < end:
            for m in c.receive(32, 20):
                got.append({"lite": m.lite_topic, "body": m.body.decode(), "topic": m.topic})
                first_at = first_at or time.time() - started
                c.ack(m)
        extra = [m.body.decode() for m in c.receive(32, 20)]
        return {"got": got, "first_after_s": first_at, "extra": extra, "quota": quota}
    finally:
        c.shutdown()


SCENARIOS = {f.__name__: f for f in (push_wildcard, simple_split_name)}

if __name__ == "__main__":
    results = {}
    for name in SPEC["scenarios"]:
        started = time.time()
        results[name] = SCENARIOS[name]()
        results[name + "_s"] = round(time.time() - started, 2)
    print(json.dumps(results))
