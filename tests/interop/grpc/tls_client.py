"""The official RocketMQ 5.x Python client over TLS (its ``tls_enable=True``) against Skiff's
gRPC endpoint; run under that client's interpreter (SKIFF_RMQ5_PYTHON).

Usage: tls_client.py SPEC_JSON, SPEC = {"endpoint", "topic", "group", "count", "tls"}.
Prints one JSON object: what was sent and received, or the error that stopped the sending.
The client verifies the server's certificate against gRPC's roots: the test points
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH at the broker's self-signed certificate (or does not).
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

SPEC = json.loads(sys.argv[1])
CFG = ClientConfiguration(SPEC["endpoint"], Credentials(), request_timeout=3)
TLS = SPEC["tls"]
DEADLINE_S = 30


def send_and_receive() -> dict:
    producer = Producer(CFG, (SPEC["topic"],), tls_enable=TLS)
    sent = []
    try:
        producer.startup()
        for i in range(SPEC["count"]):
            m = Message()
            m.topic, m.body, m.tag = SPEC["topic"], f"tls-{i}".encode(), "T"
            sent.append(producer.send(m).message_id)
    except Exception as exc:  # noqa: BLE001 - the test asserts on the text
        return {"send_error": f"{type(exc).__name__}: {exc}", "sent": sent}
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(CFG, SPEC["group"], {SPEC["topic"]: FilterExpression("*")}, await_duration=2,
                              tls_enable=TLS)
    consumer.startup()
    got, end = [], time.time() + DEADLINE_S
    while len(got) < len(sent) and time.time() < end:
        for m in consumer.receive(32, 10):
            got.append({"body": m.body.decode(), "id": m.message_id})
            consumer.ack(m)
    consumer.shutdown()
    return {"sent": sent, "got": got}


print(json.dumps(send_and_receive()))
