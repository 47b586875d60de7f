"""FIFO across a broker failover with the official RocketMQ 5.x Python client (PyPI
rocketmq-python-client 5.1.2): a Producer sends message groups to a FIFO topic while a
SimpleConsumer of an orderly group receives and acknowledges; the test kills the master -9 in
the middle. Run under that client's own interpreter (SKIFF_RMQ5_PYTHON), as client.py.

Usage: fifo_failover_client.py SPEC_JSON, SPEC = {"endpoint": "127.0.0.1:P;127.0.0.2:P", "scenarios":
["fifo_failover"], "topic": t, "group": g, "groups": n, "per_group": m, "half": path, "killed": path}.
The script creates ``half`` once half of the messages are sent and a quarter acknowledged, and
sends the last round only after the test created ``killed``. Every send is retried until it is
answered OK (the client refreshes its routes 10 s after its start, then every 30 s: until then it
sends to the dead master). Prints what was sent, received (in order) and acknowledged.
"""

from __future__ import annotations

import os
import threading
import time

from rocketmq import FilterExpression, Message, Producer, SimpleConsumer
from scenario import CFG, SPEC, main

DEADLINE_S = 100
"""Long enough for the client's second route refresh (40 s after its start) should the kill miss the first."""
RETRY_PAUSE_S = 0.2
PACE_S = 0.02
"""Between sends after the half: the kill lands while the producer is sending."""


def fifo_failover():
    topic, group, groups, per_group = SPEC["topic"], SPEC["group"], SPEC["groups"], SPEC["per_group"]
    total, end = groups * per_group, time.time() + DEADLINE_S
    sent, got, acked, errors = [], [], set(), {"send": 0, "receive": 0, "ack": 0}
    lock = threading.Lock()

    def send_all():
        p = Producer(CFG, (topic,))
        p.startup()
        try:
            for k in range(per_group):
                if k == per_group // 2:
                    while time.time() < end:
                        with lock:
                            if len(acked) >= total // 4:
                                break
                        time.sleep(0.05)
                    open(SPEC["half"], "w").close()
                if k == per_group - 1:
                    while not os.path.exists(SPEC["killed"]) and time.time() < end:
                        time.sleep(0.05)
                for g in range(groups):
                    m = Message()
                    m.topic, m.body, m.message_group = topic, f"g{g}:{k}".encode(), f"g{g}"
                    while time.time() < end:
                        try:
                            p.send(m)
                            break
                        except Exception:  # noqa: BLE001 - the master died: retry until the route knows the new one
                            errors["send"] += 1
                            time.sleep(RETRY_PAUSE_S)
                    else:
                        return
                    sent.append(f"g{g}:{k}")
                    if k >= per_group // 2:
                        time.sleep(PACE_S)
        finally:
            p.shutdown()

    producer = threading.Thread(target=send_all)
    c = SimpleConsumer(CFG, group, {topic: FilterExpression()}, await_duration=2)
    c.startup()
    producer.start()
    while len(acked) < total and time.time() < end:
        try:
            batch = c.receive(16, 15)
        except Exception:  # noqa: BLE001 - the dead master, until the route refresh
            errors["receive"] += 1
            time.sleep(RETRY_PAUSE_S)
            continue
        for m in batch:
            body = m.body.decode()
            got.append([body, m.delivery_attempt])
            try:
                c.ack(m)
            except Exception:  # noqa: BLE001 - the batch comes again from the new master
                errors["ack"] += 1
                continue
            with lock:
                acked.add(body)
    producer.join(DEADLINE_S)
    c.shutdown()
    return {"sent": sent, "got": got, "acked": sorted(acked), "errors": errors}


if __name__ == "__main__":
    main([fifo_failover])
