"""Running the scripts of tests/interop/cpp/ under the RocketMQ C++ client's interpreter.

`make test` builds PyPI `rocketmq` 0.4.4 (the C++ client) into its own venv and passes
that interpreter as SKIFF_CPP_PYTHON; without it the default build path is tried, and
the tests are skipped, saying why, only when neither exists.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "cpp"
DEFAULT_PYTHON = REPO / "build" / "venv-rocketmq-cpp" / "bin" / "python"


def cpp_python() -> str:
    path = os.environ.get("SKIFF_CPP_PYTHON") or str(DEFAULT_PYTHON)
    if not Path(path).exists():
        pytest.skip(f"the RocketMQ C++ client is not installed: SKIFF_CPP_PYTHON is unset and {DEFAULT_PYTHON} "
                    f"is missing (run `make test`, which builds it)")
    return path


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home)}  # the C++ client logs under $HOME/logs/rocketmq-cpp


def start_script(home: Path, name: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    """Start ``cpp/NAME.py SPEC``; its stdout and stderr are pipes."""
    return subprocess.Popen([cpp_python(), str(SCRIPTS / f"{name}.py"), json.dumps(spec)], cwd=SCRIPTS,
                            env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_script(home: Path, name: str, spec: dict[str, Any], timeout_s: float = 60) -> dict[str, Any]:
    """Run ``cpp/NAME.py SPEC`` to its end and return the JSON it prints."""
    proc = start_script(home, name, spec)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{out}\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def produce(home: Path, namesrv: str, topic: str, messages: list[dict[str, Any]], *, mode: str = "sync",
            group: str = "PG-cpp", **extra: Any) -> list[dict[str, Any]]:
    spec = {"namesrv": namesrv, "group": group, "topic": topic, "mode": mode, "messages": messages, **extra}
    results = run_script(home, "producer", spec)["results"]
    errors = [r for r in results if "error" in r]
    assert not errors, errors
    return results


class PushConsumer:
    """A `cpp/push_consumer.py` process; ``messages`` fills as it prints deliveries."""

    def __init__(self, home: Path, namesrv: str, group: str, topic: str, **spec: Any) -> None:
        self.proc = start_script(home, "push_consumer", {"namesrv": namesrv, "group": group, "topic": topic, **spec})
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._ready = False
        threading.Thread(target=self._read, daemon=True).start()
        self.wait(lambda: self._ready, 30, "the consumer starting")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            item = json.loads(line)
            with self._cond:
                if item.get("ready"):
                    self._ready = True
                elif "id" in item:
                    self.messages.append(item)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not check():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"{what}: not within {timeout_s} s (exit {self.proc.poll()}); "
                                         f"{len(self.messages)} messages so far\n{self._stderr()}")
                self._cond.wait(min(remaining, 0.2))

    def wait_for(self, count: int, timeout_s: float = 30, what: str = "messages") -> list[dict[str, Any]]:
        self.wait(lambda: len(self.messages) >= count, timeout_s, f"{count} {what}")
        with self._cond:
            return list(self.messages)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.messages)

    def _stderr(self) -> str:
        return "" if self.proc.poll() is None else (self.proc.stderr.read() if self.proc.stderr else "")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
