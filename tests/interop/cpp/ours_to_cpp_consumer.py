"""Run by the C++ client's interpreter (PyPI `rocketmq` 0.4.4): a push consumer that
prints every message it receives as one JSON line, then exits.

    $SKIFF_CPP_PYTHON ours_to_cpp_consumer.py NAMESRV TOPIC GROUP EXPRESSION COUNT TIMEOUT_S

It prints "READY" once started, then a line per message; it exits 0 after COUNT
distinct messages, or 1 if TIMEOUT_S passes first.
"""

import json
import sys
import threading

from rocketmq.client import PushConsumer


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def main():
    namesrv, topic, group, expression, count, timeout_s = sys.argv[1:7]
    count, timeout_s = int(count), float(timeout_s)
    seen = set()
    lock = threading.Lock()
    done = threading.Event()

    def on_message(msg):
        record = {
            "id": msg.id, "topic": msg.topic, "tags": text(msg.tags), "keys": text(msg.keys),
            "body": text(msg.body), "region": text(msg.get_property("region")),
            "uniq_key": text(msg.get_property("UNIQ_KEY")), "queue_id": msg.queue_id,
            "queue_offset": msg.queue_offset,
        }
        with lock:
            print(json.dumps(record), flush=True)
            seen.add(record["id"])
            if len(seen) >= count:
                done.set()

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_instance_name("cpp-interop")
    consumer.subscribe(topic, on_message, expression)
    consumer.start()
    print("READY", flush=True)
    finished = done.wait(timeout_s)
    consumer.shutdown()
    return 0 if finished else 1


if __name__ == "__main__":
    sys.exit(main())
