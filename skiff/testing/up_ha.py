"""`skiff up --ha` as a real process on free 127.0.0.1 ports, with what it prints parsed:
the NameServer, the dashboard, and each broker child's pid, address, role and epoch.

    with UpHa(tmp_path) as up:
        up.namesrv_addr, up.dashboard_url, up.brokers[1].pid, up.master_id
        os.kill(up.brokers[up.master_id].pid, signal.SIGKILL)
        up.wait_line(r"is MASTER now, epoch (\\d+)", since=mark)
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from skiff.testing.processes import ProcessError, SkiffProcess, free_port

STARTUP_TIMEOUT_S = 90.0
PORT_TAKEN_RETRIES = 1
HEADER = re.compile(r"skiff up --ha: NameServer (?P<namesrv>\S+), etcd (?P<etcd>\S+) \(pid (?P<etcd_pid>\d+)\), "
                    r"dashboard (?P<dashboard>\S+), store (?P<store>.+)$")
BROKER = re.compile(r"^\s+\S+ id (?P<id>\d+): pid (?P<pid>\d+), (?P<addr>\S+) \((?P<role>MASTER|slave|\?), "
                    r"epoch (?P<epoch>[^)]+)\)")
REPORT_END = re.compile(r"^\s+(failover: kill -9|try: skiff cluster list)")


@dataclasses.dataclass
class Child:
    broker_id: int
    pid: int
    addr: str
    role: str
    epoch: str


def free_ports_apart(offsets: Sequence[int], host: str = "127.0.0.1", attempts: int = 200) -> int:
    """A port ``p`` such that ``p + o`` is free (a moment ago) for every offset ``o``: `skiff up --ha`
    places broker 2's ports 10 above broker 1's, and HA ports 1 above listen ports."""
    for _ in range(attempts):
        base = free_port(host)
        if base + max(offsets) > 65535:
            continue
        held: list[socket.socket] = []
        try:
            for o in offsets:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                held.append(s)
                s.bind((host, base + o))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no free ports at offsets {list(offsets)} after {attempts} attempts")


def started_on_free_ports(start: Callable[[], SkiffProcess], ready: str,
                          attempts: int = 3) -> tuple[SkiffProcess, re.Match[str]]:
    """``start()`` (which picks its ports with `free_ports_apart`) until its output matches
    ``ready``: a port free a moment ago can be taken by another process before the bind (a
    client's outgoing port), and then the try-out exits saying "address already in use" and is
    started again on new ports. Any other failure is raised at once."""
    for attempt in range(1, attempts + 1):
        proc: SkiffProcess | None = None
        try:
            proc = start()
            return proc, proc.wait_for_line(ready, 30)
        except ProcessError as exc:
            if proc is not None and proc.popen.poll() is None:
                proc.stop()
            if attempt == attempts or "address already in use" not in str(exc):
                raise
    raise AssertionError("unreachable")


class UpHa:
    """``skiff up --ha`` storing under ``root`` (``--dir root/store-ha``), every port free (the
    dashboard's and the NameServer's picked by the servers themselves), metrics off, a killed
    broker restarted after ``restart_delay_s``."""

    def __init__(self, root: str | Path, *extra: str, restart_delay_s: float = 1.0) -> None:
        self.root = Path(root)
        self.store = self.root / "store-ha"
        self.extra = list(extra)
        self.restart_delay_s = restart_delay_s
        self.proc: SkiffProcess | None = None
        self.namesrv_addr = ""
        self.dashboard_url = ""
        self.etcd_pid = 0
        self.brokers: dict[int, Child] = {}

    def _args(self) -> list[str]:
        broker = free_ports_apart((0, 1, 10, 11))
        grpc = free_ports_apart((0, 10))
        etcd = free_ports_apart((0,))
        return ["up", "--ha", "--dir", str(self.store), "--namesrv-port", "0", "--dashboard-port", "0",
                "--broker-port", str(broker), "--grpc-port", str(grpc), "--etcd-port", str(etcd),
                "--etcd-peer-port", str(free_port()), "--metrics-port", "0", "--namesrv-metrics-port", "0",
                "--kafka-port", "0", "--restart-delay", str(self.restart_delay_s), *self.extra]

    def start(self) -> UpHa:
        """Start it; once more with other ports when one it was given got taken before its server
        bound it (another test's client can get it as an ephemeral port in between), a fresh store."""
        for attempt in range(PORT_TAKEN_RETRIES + 1):
            try:
                return self._start()
            except ProcessError as exc:
                if "address already in use" not in str(exc) or attempt == PORT_TAKEN_RETRIES:
                    raise
                shutil.rmtree(self.store, ignore_errors=True)
        raise AssertionError("unreachable")

    def _start(self) -> UpHa:
        self.proc = SkiffProcess(self._args())
        try:
            header = self.wait_line(HEADER, STARTUP_TIMEOUT_S)
            self.namesrv_addr, self.dashboard_url = header["namesrv"], header["dashboard"]
            self.etcd_pid = int(header["etcd_pid"])
            self.wait_line(REPORT_END, 10)
            for line in self.proc.output.splitlines():
                m = BROKER.search(line)
                if m is not None:
                    self.brokers[int(m["id"])] = Child(int(m["id"]), int(m["pid"]), m["addr"], m["role"], m["epoch"])
        except BaseException:
            self.proc.kill()
            raise
        return self

    @property
    def master_id(self) -> int:
        masters = [b.broker_id for b in self.brokers.values() if b.role == "MASTER"]
        assert len(masters) == 1, f"not one master in the report: {self.brokers}"
        return masters[0]

    def mark(self) -> int:
        """The number of output lines so far: ``since`` for `wait_line`, to wait for later lines only."""
        assert self.proc is not None
        return self.proc.output.count("\n")

    def wait_line(self, pattern: str | re.Pattern[str], timeout_s: float = 30.0, since: int = 0) -> re.Match[str]:
        assert self.proc is not None
        return self.proc.wait_for_line(pattern, timeout_s, start=since)

    def stop(self) -> int:
        assert self.proc is not None
        return self.proc.stop(60)

    def __enter__(self) -> UpHa:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """A clean stop, also after a failure (the brokers die with it anyway; etcd would not)."""
        if self.proc is None or self.proc.popen.poll() is not None:
            return
        try:
            self.stop()
        except ProcessError:
            if exc_type is None:
                raise
        finally:
            if self.etcd_pid and alive(self.etcd_pid):
                os.kill(self.etcd_pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0 probes it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
