"""The official RocketMQ 5.x Python client (5.1.2) with session credentials against a broker with
ACL 2.0; run under that client's interpreter (SKIFF_RMQ5_PYTHON).

Usage: acl2_client.py SPEC_JSON, SPEC = {"endpoint", "topic", "group", "bodies": [...],
"cases": {name: [accessKey, secretKey] or [accessKey, secretKey, TZ]}}: with a TZ the case runs in
that time zone (the client signs its local time as if it were UTC). The first case must be allowed: it sends the bodies and
receives them with a simple consumer. The others only try to send one message. Prints one JSON
object: case -> {"sent", "got"} or {"error": "<exception class>: <message>"}.
"""

from __future__ import annotations

import json
import os
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

SPEC = json.loads(sys.argv[1])
DEADLINE_S = 30


def config(ak, sk):
    return ClientConfiguration(SPEC["endpoint"], Credentials(ak, sk), request_timeout=5)


def message(body):
    m = Message()
    m.topic, m.body = SPEC["topic"], body.encode()
    return m


def allowed(cfg):
    producer = Producer(cfg, (SPEC["topic"],))
    producer.startup()
    try:
        sent = [producer.send(message(b)).message_id for b in SPEC["bodies"]]
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(cfg, SPEC["group"], {SPEC["topic"]: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    got, end = [], time.time() + DEADLINE_S
    try:
        while len(got) < len(sent) and time.time() < end:
            for m in consumer.receive(32, 15):
                got.append(m.body.decode())
                consumer.ack(m)
    finally:
        consumer.shutdown()
    return {"sent": sent, "got": got}


def refused(cfg):
    producer = Producer(cfg)
    try:
        producer.startup()
        receipt = producer.send(message("should-not-land"))
        return {"sent": [receipt.message_id]}
    except Exception as exc:  # the client's own error types: we report whichever it raised
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        try:
            producer.shutdown()
        except Exception:
            pass


def main():
    out = {}
    for i, (name, (ak, sk, *tz)) in enumerate(SPEC["cases"].items()):
        os.environ["TZ"] = tz[0] if tz else "UTC"
        time.tzset()
        cfg = config(ak, sk)
        out[name] = allowed(cfg) if i == 0 else refused(cfg)
    print(json.dumps(out))


main()
