"""Real `skiff` processes for tests: start one on 127.0.0.1, wait for the line
that says where it listens (with a deadline), read its output, stop it.

Servers started with port 0 pick a free port themselves and print it, so tests
never race for ports; `free_port` is for the tests that need a port number
before the server starts (a port in use, a restart on the same port).
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

LISTENING = re.compile(r"skiff (?P<component>\w+) listening on (?P<host>[^\s:]+|\[[^\]]+\]):(?P<port>\d+)")
"""The line every Skiff server logs once it accepts connections."""

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

_live: set[SkiffProcess] = set()


def skiff_command(args: Sequence[str]) -> list[str]:
    """The command line running ``skiff ARGS`` with this interpreter."""
    return [sys.executable, "-m", "skiff", *args]


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (prefer port 0 where the server allows it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ProcessError(AssertionError):
    """A Skiff process did not do what the test waited for; the message has its output."""


class SkiffProcess:
    """A running `skiff` command whose combined stdout and stderr is collected by line."""

    def __init__(self, args: Sequence[str], *, cwd: str | Path | None = None,
                 env: Mapping[str, str] | None = None, command_prefix: Sequence[str] | None = None) -> None:
        """``command_prefix`` replaces ``python -m skiff`` (e.g. to run under a profiler)."""
        self.args = list(args)
        self._lines: list[str] = []
        self._cond = threading.Condition()
        command = [*command_prefix, *args] if command_prefix is not None else skiff_command(args)
        self.popen = subprocess.Popen(
            command, cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        _live.add(self)
        self._reader = threading.Thread(target=self._read, name=f"skiff-output-{self.popen.pid}", daemon=True)
        self._reader.start()
        self.host = ""
        self.port = 0

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def output(self) -> str:
        with self._cond:
            return "".join(self._lines)

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for_line(self, pattern: str | re.Pattern[str], timeout_s: float = START_TIMEOUT_S,
                      start: int = 0) -> re.Match[str]:
        """The first match of ``pattern`` in output lines from line ``start`` on; waits up to ``timeout_s``."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout_s
        seen = start
        with self._cond:
            while True:
                for line in self._lines[seen:]:
                    m = regex.search(line)
                    if m:
                        return m
                seen = len(self._lines)
                remaining = deadline - time.monotonic()
                if self.popen.poll() is not None and not self._reader.is_alive():
                    raise ProcessError(f"skiff {' '.join(self.args)} exited with {self.popen.returncode} "
                                       f"before printing {regex.pattern!r}:\n{''.join(self._lines)}")
                if remaining <= 0:
                    raise ProcessError(f"skiff {' '.join(self.args)} did not print {regex.pattern!r} "
                                       f"within {timeout_s} s:\n{''.join(self._lines)}")
                self._cond.wait(min(remaining, 0.5))

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> SkiffProcess:
        m = self.wait_for_line(LISTENING, timeout_s)
        self.host, self.port = m["host"].strip("[]"), int(m["port"])
        return self

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Wait for the exit; `ProcessError` (with the output) if it does not come in time."""
        try:
            code = self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise ProcessError(f"skiff {' '.join(self.args)} still runs after {timeout_s} s:\n{self.output}") from None
        self._reader.join(timeout_s)
        _live.discard(self)
        return code

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait for a clean exit; killed (and `ProcessError`) if it hangs."""
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout_s)
        except ProcessError:
            self.kill()
            raise

    def kill(self) -> int:
        self.signal(signal.SIGKILL)
        return self.wait()

    def __enter__(self) -> SkiffProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.popen.poll() is None and exc_type is not None:
            self.kill()
        elif self.popen.poll() is None:
            self.stop()


def start_skiff(args: Sequence[str], *, timeout_s: float = START_TIMEOUT_S, cwd: str | Path | None = None,
                env: Mapping[str, str] | None = None, wrapper: Sequence[str] = ()) -> SkiffProcess:
    """Start ``skiff ARGS`` and return once it logs that it listens (killed if it never does).
    ``wrapper``: a command that runs the rest (e.g. ``ip netns exec NAME``)."""
    proc = SkiffProcess(args, cwd=cwd, env=env,
                        command_prefix=[*wrapper, *skiff_command([])] if wrapper else None)
    try:
        return proc.wait_listening(timeout_s)
    except BaseException:
        if proc.popen.poll() is None:
            proc.kill()
        raise


def start_namesrv(*extra: str, host: str = "127.0.0.1", port: int = 0, timeout_s: float = START_TIMEOUT_S,
                  cwd: str | Path | None = None) -> SkiffProcess:
    """A `skiff namesrv` on ``host`` (port 0: it picks one; see ``.port``)."""
    return start_skiff(["namesrv", "--host", host, "--listen-port", str(port), *extra], timeout_s=timeout_s, cwd=cwd)


SMALL_BROKER = (
    "--mappedFileSizeCommitLog=8388608",
    "--mappedFileSizeConsumeQueue=60000",
    "--maxHashSlotNum=4096",
    "--maxIndexNum=16384",
    "--flushIntervalCommitLog=50",
    "--flushConsumerOffsetInterval=500",
)
"""Store files small enough for tests (sparse, but a test should not map gigabytes) and
short flush intervals."""


def broker_args(store_dir: str | Path, namesrv_addr: str = "", *extra: str, host: str = "127.0.0.1", port: int = 0,
                name: str = "broker-a", sizes: Sequence[str] = SMALL_BROKER) -> list[str]:
    """`skiff broker` arguments for a broker on ``host`` storing in ``store_dir`` (with the
    small files and short intervals of `SMALL_BROKER` unless ``sizes`` says otherwise), with no gRPC
    endpoint unless ``extra`` names a ``--grpcServerPort``."""
    args = ["broker", f"--listenHost={host}", f"--brokerIP1={host}", f"--listenPort={port}",
            f"--storePathRootDir={store_dir}", f"--brokerName={name}", "--grpcServerPort=0", *sizes]
    if namesrv_addr:
        args.append(f"--namesrvAddr={namesrv_addr}")
    return [*args, *extra]


def start_broker(store_dir: str | Path, namesrv_addr: str = "", *extra: str, host: str = "127.0.0.1",
                 port: int = 0, name: str = "broker-a", timeout_s: float = START_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, wrapper: Sequence[str] = ()) -> SkiffProcess:
    """A `skiff broker` (port 0: it picks one, and holds it across `Cluster` restarts)."""
    return start_skiff(broker_args(store_dir, namesrv_addr, *extra, host=host, port=port, name=name),
                       timeout_s=timeout_s, env=env, wrapper=wrapper)


def run_skiff(args: Sequence[str], *, timeout_s: float = START_TIMEOUT_S,
              cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``skiff ARGS`` to its end (for commands expected to exit), output combined."""
    return subprocess.run(skiff_command(args), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout_s)


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_live):
        if proc.popen.poll() is None:
            proc.popen.kill()
