"""Senders run under another interpreter: the RocketMQ C++ client's (PyPI ``rocketmq`` 0.4.4)
or the official 5.x Python client's. ``skiff bench clients`` runs this file by its path:

    python _rocketmq_senders.py SPEC_JSON

SPEC: {"client": "cpp" | "rmq5", "namesrv" (cpp) | "endpoint" (rmq5), "topic", "group",
"threads", "seconds", "size"}. Each of ``threads`` threads sends one message at a time with the
client's synchronous send (the C++ client's ``send_sync``, the 5.x client's ``send``: one
SEND_MESSAGE / SendMessage per message) until ``seconds`` pass. Prints one JSON line:
{"sent", "errors", "seconds", "first_error"}.

Standard library only, besides the client: skiff is not installed in those environments. The
client is imported by name at run time, so this module imports nothing the checks of skiff's
own environment would look for.
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

WARMUP_SENDS = 5
"""Sends each thread has answered before the measured run."""
WARMUP_S = 30.0


def cpp_sender(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[], None]]:
    client = importlib.import_module("rocketmq.client")
    producer = client.Producer(spec["group"], timeout=5000)
    producer.set_namesrv_addr(spec["namesrv"])
    producer.start()
    body = b"x" * spec["size"]

    def send() -> None:
        msg = client.Message(spec["topic"])
        msg.set_body(body)
        result = producer.send_sync(msg)
        if result.status.name != "OK":
            raise RuntimeError(f"send status {result.status.name}")
    return send, producer.shutdown


def rmq5_sender(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[], None]]:
    rocketmq = importlib.import_module("rocketmq")
    config = rocketmq.ClientConfiguration(spec["endpoint"], rocketmq.Credentials(), request_timeout=5)
    producer = rocketmq.Producer(config, (spec["topic"],))
    producer.startup()
    body = b"x" * spec["size"]

    def send() -> None:
        msg = rocketmq.Message()
        msg.topic, msg.body = spec["topic"], body
        producer.send(msg)
    return send, producer.shutdown


def warm(send: Callable[[], None]) -> None:
    """A few sends answered, retried for a while: each thread's route and connection ready
    before the measured run (a thread's first send can find no route yet in the C++ client)."""
    deadline = time.monotonic() + WARMUP_S
    done = 0
    while done < WARMUP_SENDS:
        try:
            send()
            done += 1
        except Exception:  # noqa: BLE001 - the clients raise their own types
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    send, shutdown = (cpp_sender if spec["client"] == "cpp" else rmq5_sender)(spec)
    counts = [[0, 0] for _ in range(spec["threads"])]
    first_error: list[str] = []
    warmed = threading.Barrier(spec["threads"] + 1)
    go = threading.Event()
    stop_at = [0.0]

    def worker(tally: list[int]) -> None:
        try:
            warm(send)
        except Exception:
            warmed.abort()  # the run cannot start: the main thread's wait raises too
            raise
        warmed.wait()
        go.wait()
        while time.monotonic() < stop_at[0]:
            try:
                send()
                tally[0] += 1
            except Exception as exc:  # noqa: BLE001 - counted; the clients raise their own types
                tally[1] += 1
                if not first_error:
                    first_error.append(repr(exc))
    try:
        threads = [threading.Thread(target=worker, args=(c,)) for c in counts]
        for t in threads:
            t.start()
        warmed.wait()
        print("READY", flush=True)
        sys.stdin.readline()  # GO: the parent marks the broker's CPU first
        started = time.monotonic()
        stop_at[0] = started + spec["seconds"]
        go.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    finally:
        shutdown()
    return {"sent": sum(c[0] for c in counts), "errors": sum(c[1] for c in counts), "seconds": elapsed,
            "first_error": first_error[0] if first_error else None}


if __name__ == "__main__":
    # Run by path, this file's directory leads sys.path, where skiff.bench's own modules (grpc.py
    # among them) would shadow the packages the clients import.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    print(json.dumps(run(json.loads(sys.argv[1]))), flush=True)
