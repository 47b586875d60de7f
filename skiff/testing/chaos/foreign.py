"""Senders of a chaos run driven by RocketMQ's own clients (``skiff chaos --clients``): the C++
client (PyPI ``rocketmq`` 0.4.4, over remoting through the NameServer) and the official 5.x
Python client (over gRPC, to the brokers' gRPC endpoints). Each runs as a process under its
own interpreter (``_foreign_sender.py``, run by path: neither environment has skiff) and
prints every send's invoke and answer as a history line, which `ForeignSenders` adds to the
run's history as it comes: the checkers see the same records as for our own producers, and
our consumer groups read these clients' messages with ours.

The interpreters are the ones the interop tests use: SKIFF_CPP_PYTHON and SKIFF_RMQ5_PYTHON,
else the checkout's ``build/venv-rocketmq-cpp`` and ``build/venv-rocketmq5`` (`make test`
builds both)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import IO

import skiff
from skiff.testing.chaos import _foreign_sender
from skiff.testing.chaos.history import Event, HistoryWriter, Result

BUILD = Path(skiff.__file__).resolve().parents[1] / "build"
INTERPRETERS = {
    "cpp": ("SKIFF_CPP_PYTHON", BUILD / "venv-rocketmq-cpp" / "bin" / "python"),
    "rmq5": ("SKIFF_RMQ5_PYTHON", BUILD / "venv-rocketmq5" / "bin" / "python"),
}
"""Which interpreter runs each client: the environment variable the tests use, else the checkout's build."""
KEY_PREFIX = {"cpp": "c", "rmq5": "g"}
"""Each client's sharding keys, ``c0, c1, ...`` and ``g0, g1, ...`` (ours are ``k0, ...``): a value names its client."""
CLIENTS = ("python", *INTERPRETERS)
"""What ``--clients`` takes: ``python`` is our producers (`workers.Producers`)."""
GRPC_PORT = 8081
"""The brokers' gRPC port when a 5.x client runs: each broker has an address of its own, so one
port for all (as proxies use 8081), which is what the endpoint's routes assume."""
SEND_TIMEOUT_MS = 3000
"""Each client's send timeout (the C++ client's default)."""
READY_TIMEOUT_S = 60.0
"""A client's start: its interpreter, the library, the first route (a loaded machine)."""
STOP_TIMEOUT_S = 60.0
"""From the stop line to the process's end: sends under way answer or time out (with the
clients' own retries), then the client shuts down."""


class ForeignClientMissing(RuntimeError):
    """A client asked for whose interpreter is not installed."""


def interpreter(client: str) -> str:
    env, default = INTERPRETERS[client]
    path = os.environ.get(env) or str(default)
    if not Path(path).exists():
        raise ForeignClientMissing(f"the {client} client is not installed: {env} is unset and {default} is missing "
                                   f"(`make test` builds it)")
    return path


class ForeignSenders:
    """One client's process: ``keys`` senders at ``rate`` messages a second together."""

    def __init__(self, client: str, history: HistoryWriter, *, namesrv: str, grpc_endpoints: str, topic: str,
                 keys: int, rate: float, home: Path, log: Path) -> None:
        if client not in INTERPRETERS:
            raise ValueError(f"unknown client {client!r}; known: {', '.join(INTERPRETERS)}")
        self.client = client
        self.history = history
        self.spec = {"client": client, "namesrv": namesrv, "endpoints": grpc_endpoints, "topic": topic,
                     "group": f"chaos-{client}-producer", "keys": [f"{KEY_PREFIX[client]}{i}" for i in range(keys)],
                     "interval_s": keys / rate, "timeout_ms": SEND_TIMEOUT_MS}
        self.home = home
        self.log = log
        self.acked = 0
        """SEND_OK answers so far."""
        self.malformed: list[str] = []
        self._ready = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._stderr: IO[str] | None = None

    def start(self) -> None:
        """Start the process and wait for its client to be up (not for its first answer)."""
        self.home.mkdir(parents=True, exist_ok=True)  # the clients log under $HOME/logs
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.log, "w", encoding="utf-8")  # noqa: SIM115 - open while the process runs
        self._proc = subprocess.Popen([interpreter(self.client), _foreign_sender.__file__, json.dumps(self.spec)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                      text=True, env={**os.environ, "HOME": str(self.home)})
        self._reader = threading.Thread(target=self._read, name=f"chaos-{self.client}", daemon=True)
        self._reader.start()
        if not self._ready.wait(READY_TIMEOUT_S) or self._proc.poll() is not None:
            self._end()
            raise RuntimeError(f"the {self.client} client did not start in {READY_TIMEOUT_S:.0f} s "
                               f"(exit {self._proc.poll()}); its output is in {self.log}")

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                item = json.loads(line)
                if isinstance(item, dict):
                    self._ready.set()
                    continue
                if not isinstance(item, list) or len(item) != len(Event._fields):
                    raise ValueError("not a history line")
                client, op, kind, result, value, key, t_ms, latency_ms, extra = item
                event = Event(str(client), str(op), str(kind), str(result), str(value), str(key), int(t_ms),
                              int(latency_ms), str(extra))
            except (ValueError, TypeError):
                self.malformed.append(line[:200])  # a line the client library printed itself
                continue
            self.history.add(event)
            self.acked += event.result == Result.SUCCESS
        self._ready.set()  # the process ended: start() stops waiting

    def stop(self) -> None:
        """The stop line; every answer in the history before this returns."""
        if self._proc is None:
            return
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.write("stop\n")
                self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it ended already
        try:
            self._proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        self._end()

    def _end(self) -> None:
        assert self._proc is not None
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
