"""A chaos run's sender driven by one of RocketMQ's own clients, run under that client's
interpreter (skiff is not installed there: standard library only, besides the client):

    python _foreign_sender.py SPEC_JSON

SPEC: {"client": "cpp" | "rmq5", "namesrv" (cpp) | "endpoints" (rmq5, ``host:port;...``),
"topic", "group", "keys": [key, ...], "interval_s", "timeout_ms"}.

- ``cpp``: the RocketMQ C++ client (PyPI ``rocketmq`` 0.4.4), ``send_orderly`` with the key's
  index as the selector's argument (a key keeps its queue, as our hash selector does); it
  retries on that queue itself.
- ``rmq5``: the official 5.x Python client, ``Producer.send`` over gRPC with the key as the
  message group (the client hashes the group to a queue, and retries there).

One thread per key sends the key's values ``<key>-0, <key>-1, ...`` one at a time, one every
``interval_s``, each value once (the client's own retries aside), as the chaos run's own
producers do (`skiff.testing.chaos.workers`). Every send's invoke and answer is printed as it
happens, one JSON line each: the nine fields of a history line (`skiff.testing.chaos.history`),
with the wall-clock time of this machine, the clock of the whole run. An answer is SUCCESS
only for the client's SEND_OK (the C++ client's ``OK``, a 5.x send receipt), FAILURE when the
client had no route or made no connection (nothing was sent), UNKNOWN otherwise (another status, a timeout, any
other error). ``{"ready": true}`` comes first, once the client has started. A line on stdin
(or its end) stops the senders after the send under way; the client is shut down and the
process exits.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

NOT_SENT = ("no route info",                      # the C++ client: no broker to send to
            "failed to connect to all addresses")  # gRPC: no connection was made
"""Errors of a send that never left the client: FAILURE, not UNKNOWN."""

Send = Callable[[int, str, str], tuple[bool, str]]
"""(key index, key, value) → (SEND_OK?, what the client answered)."""

_out = threading.Lock()


def emit(item: Any) -> None:
    line = json.dumps(item)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ms() -> int:
    return int(time.time() * 1000)


def cpp_client(spec: dict[str, Any]) -> tuple[Send, Callable[[], None]]:
    client = importlib.import_module("rocketmq.client")
    producer = client.Producer(spec["group"], timeout=spec["timeout_ms"])
    producer.set_namesrv_addr(spec["namesrv"])
    producer.start()

    def send(index: int, key: str, value: str) -> tuple[bool, str]:
        msg = client.Message(spec["topic"])
        msg.set_keys(key)
        msg.set_body(value.encode())
        res = producer.send_orderly(msg, index)
        return res.status.name == "OK", f"{res.status.name} {res.msg_id} @{res.offset}"
    return send, producer.shutdown


def rmq5_client(spec: dict[str, Any]) -> tuple[Send, Callable[[], None]]:
    rocketmq = importlib.import_module("rocketmq")
    config = rocketmq.ClientConfiguration(spec["endpoints"], rocketmq.Credentials(),
                                          request_timeout=max(1, spec["timeout_ms"] // 1000))  # whole seconds
    producer = rocketmq.Producer(config, (spec["topic"],))
    producer.startup()

    def send(index: int, key: str, value: str) -> tuple[bool, str]:
        msg = rocketmq.Message()
        msg.topic, msg.body, msg.message_group = spec["topic"], value.encode(), key
        receipt = producer.send(msg)
        return True, f"SEND_OK {receipt.message_id} @{receipt.offset}"  # the broker picks the group's queue
    return send, producer.shutdown


def outcome(exc: BaseException) -> str:
    text = str(exc)
    return "FAILURE" if any(s in text.lower() for s in NOT_SENT) else "UNKNOWN"


def sender(send: Send, client: str, index: int, key: str, interval_s: float, offset_s: float,
           stop: threading.Event) -> None:
    seq = 0
    next_at = time.monotonic() + offset_s
    while not stop.wait(max(0.0, next_at - time.monotonic())):
        next_at = max(next_at + interval_s, time.monotonic())
        value = f"{key}-{seq}"
        seq += 1
        started = now_ms()
        emit([client, "enqueue", "INVOKE", "", value, key, started, 0, ""])
        try:
            ok, extra = send(index, key, value)
            result = "SUCCESS" if ok else "UNKNOWN"
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome of the history
            result, extra = outcome(exc), f"{type(exc).__name__}: {exc}"[:300]
        answered = now_ms()
        emit([client, "enqueue", "RESPONSE", result, value, key, answered, answered - started, extra])


def main(spec: dict[str, Any]) -> None:
    send, shutdown = (cpp_client if spec["client"] == "cpp" else rmq5_client)(spec)
    stop = threading.Event()
    keys = spec["keys"]
    interval_s = float(spec["interval_s"])
    threads = [threading.Thread(target=sender, args=(send, f"{spec['client']}-p{i}", i, key, interval_s,
                                                     interval_s * i / len(keys), stop), daemon=True)
               for i, key in enumerate(keys)]
    emit({"ready": True})
    for t in threads:
        t.start()
    try:
        sys.stdin.readline()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=spec["timeout_ms"] / 1000 * 4 + 10)
        shutdown()


if __name__ == "__main__":
    # Run by path, this file's directory leads sys.path, where the chaos package's own modules
    # would shadow anything of the same name the clients import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    main(json.loads(sys.argv[1]))
