"""Lite topic scenarios (RocketMQ 5.5, RIP-83) of the official RocketMQ 5.x Python client (PyPI
rocketmq-python-client 5.1.2) against Skiff's gRPC endpoint; run under that client's own
interpreter (SKIFF_RMQ5_PYTHON), as tests/interop/grpc/client.py.

Usage: lite_client.py SPEC_JSON, SPEC = {"endpoint": "host:port", "scenarios": [names...], "parent": topic,
"wildcard_group": group, "group": group, "count": lite topics} (tests/interop/grpc/scenario.py).
"""

from __future__ import annotations

import threading
import time

from rocketmq import ConsumeResult, LitePushConsumer, LiteSimpleConsumer, Message, MessageListener, Producer
from scenario import CFG, SPEC, main

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

    def wait_for(self, count):
        """Until ``count`` distinct messages came, or DEADLINE_S."""
        end = time.time() + DEADLINE_S
        while time.time() < end:
            with self.lock:
                if len({g["id"] for g in self.got}) >= count:
                    return
            time.sleep(0.2)

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
        listener.wait_for(len(sent))
        with listener.lock:
            return {"sent": sent, "got": list(listener.got)}
    finally:
        c.shutdown()


def simple_split_name():
    """A LiteSimpleConsumer's subscribe_lite, which 5.1.2 sends split into characters until its 30 s
    resync: how soon its messages came, and that only the one lite topic's did; then its
    unsubscribe_lite, and what a receive gets after it."""
    send([("py-lite-topic", f"b{k}") for k in range(3)] + [("p", "not-mine"), ("y", "not-mine")])
    c = LiteSimpleConsumer(PARENT, CFG, SPEC["group"], await_duration=2)
    c.startup()
    try:
        quota = wait_for_quota(c._LiteSimpleConsumer__subscription_manager)
        started = time.time()
        c.subscribe_lite("py-lite-topic")
        got, first_at, end = [], None, started + DEADLINE_S
        while len(got) < 3 and time.time() < end:
            for m in c.receive(32, 20):
                got.append({"lite": m.lite_topic, "body": m.body.decode(), "topic": m.topic})
                first_at = first_at or time.time() - started
                c.ack(m)
        c.unsubscribe_lite("py-lite-topic")  # a PARTIAL_REMOVE: what is sent after it is not received
        send([("py-lite-topic", "after-unsubscribe")])
        extra = [m.body.decode() for m in c.receive(32, 20)]
        return {"got": got, "first_after_s": first_at, "extra": extra, "quota": quota}
    finally:
        c.shutdown()


def wait_for_quota(manager):
    """The client's lite quota once a Settings reply set it: startup does not wait for the reply, and
    subscribe_lite raises while the quota is 0."""
    end = time.time() + DEADLINE_S
    while manager.lite_subscription_quota == 0 and time.time() < end:
        time.sleep(0.05)
    return manager.lite_subscription_quota


def push_two_brokers():
    """A LitePushConsumer subscribing ``count`` lite topics one by one (subscribe_lite, synced with its
    access point only) of a parent held by two brokers; a producer sending 3 messages to each, to both
    brokers' queues in turn: what arrived."""
    names = [f"two-{i}" for i in range(SPEC["count"])]
    listener = Recorder()
    c = LitePushConsumer(CFG, SPEC["group"], PARENT, listener)
    c.startup()
    try:
        wait_for_quota(c._LitePushConsumer__subscription_manager)
        for name in names:
            c.subscribe_lite(name)
        sent = send([(name, f"{name}:{k}") for k in range(3) for name in names])
        listener.wait_for(len(sent))
        time.sleep(1)  # a duplicate would come now
        with listener.lock:
            return {"sent": sent, "got": list(listener.got)}
    finally:
        c.shutdown()


def simple_two_brokers():
    """A LiteSimpleConsumer (it receives from its route's first broker alone) subscribing ``count`` lite
    topics of a parent held by two brokers; two rounds of one message per lite topic, each round received
    and acknowledged before the next is sent (a lite topic's next batch waits for the ack of the last)."""
    names = [f"simple-two-{i}" for i in range(SPEC["count"])]
    c = LiteSimpleConsumer(PARENT, CFG, SPEC["simple_group"], await_duration=2)
    c.startup()
    try:
        wait_for_quota(c._LiteSimpleConsumer__subscription_manager)
        for name in names:
            c.subscribe_lite(name)
        rounds = []
        for k in range(2):
            sent = send([(name, f"{name}:{k}") for name in names])
            got, end = [], time.time() + DEADLINE_S
            while len(got) < len(sent) and time.time() < end:
                for m in c.receive(32, 20):
                    got.append({"lite": m.lite_topic, "body": m.body.decode(), "id": m.message_id})
                    c.ack(m)
            rounds.append({"sent": sent, "got": got})
        return {"rounds": rounds}
    finally:
        c.shutdown()


if __name__ == "__main__":
    main((push_wildcard, simple_split_name, push_two_brokers, simple_two_brokers))
