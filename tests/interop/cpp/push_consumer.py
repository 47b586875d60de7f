"""Consume with the RocketMQ C++ client's push consumer and print each message as a JSON line.

Run by tests/interop with that package's interpreter: ``python push_consumer.py SPEC_JSON``.
SPEC: {"namesrv", "group", "topic", "expression"?, "orderly"?, "broadcast"?,
       "reconsume_later"?: [keys answered RECONSUME_LATER the first time they arrive]}
Prints {"ready": true} once started, then one line per delivery: {"id", "body", "tags", "keys",
"topic", "queue_id", "queue_offset", "reconsume_times", "store_ms", "answer"}. Stops cleanly on SIGTERM.
"""

import json
import signal
import sys
import threading

from rocketmq.client import MessageModel, PushConsumer, RecvMessage
from rocketmq.ffi import _CConsumeStatus, dll

from helpers import text

lock = threading.Lock()
stop = threading.Event()


def emit(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main():
    spec = json.loads(sys.argv[1])
    model = MessageModel.BROADCASTING if spec.get("broadcast") else MessageModel.CLUSTERING
    consumer = PushConsumer(spec["group"], orderly=spec.get("orderly", False), message_model=model)
    consumer.set_namesrv_addr(spec["namesrv"])
    if spec.get("credentials"):  # [access_key, secret_key, channel]: sign requests (plain ACL)
        consumer.set_session_credentials(*spec["credentials"])
    consumer.set_thread_count(spec.get("threads", 2))
    later = set(spec.get("reconsume_later", []))
    seen_later = set()

    def on_message(_consumer, handle):
        msg = RecvMessage(handle)
        keys = text(msg.keys)
        answer = "CONSUME_SUCCESS"
        if keys in later and keys not in seen_later:
            seen_later.add(keys)
            answer = "RECONSUME_LATER"
        emit({"id": msg.id, "body": text(msg.body), "tags": text(msg.tags), "keys": keys, "topic": msg.topic,
              "queue_id": msg.queue_id, "queue_offset": msg.queue_offset, "reconsume_times": msg.reconsume_times,
              "store_ms": msg.store_timestamp, "answer": answer})
        return _CConsumeStatus[answer].value

    dll.Subscribe(consumer._handle, spec["topic"].encode(), spec.get("expression", "*").encode())
    consumer._register_callback(on_message)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    emit({"ready": True})
    stop.wait()
    consumer.shutdown()
    emit({"stopped": True})


if __name__ == "__main__":
    main()
