"""Child processes of the benchmark: start in their own process group, wait, kill.

Every server and worker the harness starts is registered here, so that a normal
end, an exception or Ctrl-C all end the same way: SIGTERM to each child's
process group, then SIGKILL for whatever is left after a grace period. Nothing
outlives the run, and nothing the harness did not start is touched.
"""

from __future__ import annotations

import atexit
import os
import resource
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

LOOPBACK = "127.0.0.1"
STOP_GRACE_S = 10.0
"""How long a child gets between SIGTERM and SIGKILL."""

RSS_SAMPLE_INTERVAL_S = 0.1


class ChildFailed(RuntimeError):
    """A child exited or did not become ready in time; carries its log's tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Child:
    """One started process and where its output goes."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def failure(self, why: str) -> ChildFailed:
        return ChildFailed(f"{self.name}: {why}\n--- {self.log_path.name} ---\n{log_tail(self.log_path)}")


@dataclass
class Children:
    """The registry of everything started; `stop_all` runs at exit and on signals."""

    _live: list[Child] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stdin: int | None = subprocess.DEVNULL,
        stdout_pipe: bool = False,
    ) -> Child:
        """Start ``argv`` in a new session (its own process group)."""
        log = open(log_path, "ab")  # noqa: SIM115 - owned by the child's lifetime
        try:
            popen = subprocess.Popen(
                list(argv),
                stdin=stdin,
                stdout=subprocess.PIPE if stdout_pipe else log,
                stderr=log,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        finally:
            log.close()
        child = Child(name, popen, log_path)
        with self._lock:
            self._live.append(child)
        return child

    def stop(self, child: Child, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the child's group, wait up to ``grace_s``, then SIGKILL it."""
        _signal_group(child.pid, signal.SIGTERM)
        try:
            code = child.popen.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            code = None
        _signal_group(child.pid, signal.SIGKILL)
        if code is None:
            code = child.popen.wait(timeout=grace_s)
        with self._lock:
            if child in self._live:
                self._live.remove(child)
        return code

    def stop_all(self) -> None:
        with self._lock:
            live = list(reversed(self._live))
        for child in live:
            self.stop(child, grace_s=3.0)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


CHILDREN = Children()


def install_cleanup() -> None:
    """Stop every child at interpreter exit and turn SIGTERM into a clean exit."""
    atexit.register(CHILDREN.stop_all)

    def on_term(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)


OPEN_FILES_WANTED = 655_350
"""RocketMQ's deployment docs ask for ``ulimit -n 655350``: a broker holds a descriptor per
ConsumeQueue file (the mapping's), and the many-queues curve has 16,384 queues."""


def raise_open_files(wanted: int = OPEN_FILES_WANTED) -> str:
    """Raise this process's open-file limit (inherited by every server and worker) as an
    operator would for a broker; what the limit is now, in words, for the report."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target in (wanted, hard):
        if target == resource.RLIM_INFINITY or soft == resource.RLIM_INFINITY or target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(target, hard)))
            break
        except (ValueError, OSError):
            continue
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft:,}"


def wait_until(
    ready: Callable[[], bool], timeout_s: float, child: Child | None = None, what: str = "ready"
) -> None:
    """Poll ``ready`` until it holds; fail at the deadline or when ``child`` dies."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while time.monotonic() < deadline:
        if ready():
            return
        if child is not None and not child.alive():
            raise child.failure(f"exited with {child.popen.returncode} before {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    if child is not None:
        raise child.failure(f"not {what} after {timeout_s:.0f} s")
    raise TimeoutError(f"not {what} after {timeout_s:.0f} s")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port: int, child: Child, timeout_s: float) -> None:
    wait_until(lambda: port_open(port), timeout_s, child, what=f"listening on {port}")


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_cpu_s(pid: int) -> dict[int, float]:
    """User+system CPU seconds of each live process in the tree under ``pid``."""
    out: dict[int, float] = {}
    for proc in _tree(pid):
        try:
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return out


def tree_rss_bytes(pid: int) -> int:
    total = 0
    for proc in _tree(pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


class TreeMeter:
    """Broker CPU seconds and peak RSS of a process tree over one measured span.

    CPU is the difference of per-process totals (a process born during the span
    counts from zero); RSS is sampled on a thread, the peak kept.
    """

    def __init__(self, pids: Sequence[int]) -> None:
        self._pids = list(pids)
        self._before: dict[int, float] = {}
        self.cpu_s = 0.0
        self.peak_rss_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)

    def _all_cpu(self) -> dict[int, float]:
        merged: dict[int, float] = {}
        for pid in self._pids:
            merged.update(tree_cpu_s(pid))
        return merged

    def _sample(self) -> None:
        while True:
            rss = sum(tree_rss_bytes(pid) for pid in self._pids)
            self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
            if self._stop.wait(RSS_SAMPLE_INTERVAL_S):
                return

    def __enter__(self) -> TreeMeter:
        self._before = self._all_cpu()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        after = self._all_cpu()
        self._stop.set()
        self._thread.join()
        self.cpu_s = sum(t - self._before.get(pid, 0.0) for pid, t in after.items())
