"""Send messages with the RocketMQ C++ client (PyPI `rocketmq` 0.4.4) and print what it answered.

Run by tests/interop with that package's interpreter: ``python producer.py SPEC_JSON``.
SPEC: {"namesrv", "group", "topic", "mode": "sync"|"async"|"oneway"|"batch"|"orderly", "credentials"?,
       "messages": [{"body", "tags"?, "keys"?, "delay"?, "arg"?, "props"?}], "retry_s"?, "interval_ms"?}
Prints one JSON object: {"results": [{"keys", "status", "msg_id", "offset", "t"} | {"keys", "error"}]}
("t": the wall-clock time of the answer).
A sync or orderly send that fails is retried for up to ``retry_s`` seconds (a broker restarting).
SIGTERM stops the sends after the one under way (retries end too) and prints what was answered.
With "stream": true each sync or orderly answer is also printed as it comes, {"answer": {...}}.
"""

import json
import signal
import sys
import threading
import time

from rocketmq.client import Message, Producer

stop = threading.Event()


def message(topic, spec):
    m = Message(topic)
    m.set_body(spec["body"])
    if spec.get("tags"):
        m.set_tags(spec["tags"])
    if spec.get("keys"):
        m.set_keys(spec["keys"])
    if spec.get("delay"):
        m.set_delay_time_level(spec["delay"])
    for name, value in spec.get("props", {}).items():
        m.set_property(name, value)
    return m


def result(spec, res):
    return {"keys": spec.get("keys"), "status": res.status.name, "msg_id": res.msg_id, "offset": res.offset,
            "t": time.time()}


def with_retry(retry_s, send):
    deadline = time.time() + retry_s
    while True:
        try:
            return send()
        except Exception:  # the C++ client raises one generic exception type
            if time.time() > deadline or stop.is_set():
                raise
            time.sleep(0.2)


def main():
    spec = json.loads(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    producer = Producer(spec["group"], timeout=spec.get("timeout_ms", 3000))
    producer.set_namesrv_addr(spec["namesrv"])
    if spec.get("credentials"):  # [access_key, secret_key, channel]: sign requests (plain ACL)
        producer.set_session_credentials(*spec["credentials"])
    producer.start()
    topic, mode, retry_s = spec["topic"], spec["mode"], spec.get("retry_s", 0)
    results = []
    try:
        if mode == "batch":
            res = producer.send_batch([message(topic, s) for s in spec["messages"]])
            results.append({"keys": None, "status": res.status.name, "msg_id": res.msg_id, "offset": res.offset})
        elif mode == "async":
            results = send_async(producer, topic, spec["messages"])
        else:
            for s in spec["messages"]:
                if stop.wait(spec.get("interval_ms", 0) / 1000):
                    break
                try:
                    if mode == "sync":
                        res = with_retry(retry_s, lambda: producer.send_sync(message(topic, s)))
                    elif mode == "orderly":
                        res = with_retry(retry_s, lambda: producer.send_orderly(message(topic, s), s["arg"]))
                    else:
                        producer.send_oneway(message(topic, s))
                        results.append({"keys": s.get("keys"), "status": "SENT"})
                        continue
                    results.append(result(s, res))
                except Exception as exc:
                    results.append({"keys": s.get("keys"), "error": str(exc)})
                if spec.get("stream"):
                    print(json.dumps({"answer": results[-1]}), flush=True)
    finally:
        producer.shutdown()
    print(json.dumps({"results": results}))


def send_async(producer, topic, specs):
    done = threading.Semaphore(0)
    results = []
    lock = threading.Lock()

    def on_success(spec):
        def callback(res):
            with lock:
                results.append(result(spec, res))
            done.release()
        return callback

    def on_error(spec):
        def callback(exc):
            with lock:
                results.append({"keys": spec.get("keys"), "error": str(exc)})
            done.release()
        return callback

    for s in specs:
        producer.send_async(message(topic, s), on_success(s), on_error(s))
    for _ in specs:
        if not done.acquire(timeout=30):
            break
    return results


if __name__ == "__main__":
    main()
