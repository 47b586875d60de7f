"""A real etcd (Debian's ``etcd-server``) on free loopback ports, one member or a cluster of
three, for controller-mode tests and ``skiff up --ha``.

    with Etcd(tmp_path / "etcd") as etcd:
        etcd.endpoint    # "127.0.0.1:PORT", for controllerEtcdEndpoints
    with EtcdCluster(tmp_path / "etcd", 3) as cluster:
        cluster.endpoints    # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        cluster.members[0].stop(); cluster.start_members([0])
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from skiff.testing.processes import free_port

ELECTION_TIMEOUT_MS = 500
HEARTBEAT_MS = 50


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class Etcd:
    """One etcd member; alone (the default) it is a cluster of one. `EtcdCluster` names its peers."""

    def __init__(self, data_dir: str | Path, *, client_port: int = 0, host: str = "127.0.0.1",
                 name: str = "skiff") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.name = name
        self.client_port = client_port or free_port(host)
        self.peer_port = free_port(host)
        self.initial_cluster = f"{name}={self.peer_url}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    def start(self, timeout_s: float = 20.0) -> Etcd:
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start the process (a member of several waits for its peers: launch them all, then wait)."""
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd is not installed (Debian: apt-get install etcd-server; make etcd)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        client = f"http://{self.host}:{self.client_port}"
        log = open(self.data_dir / "etcd.log", "ab")  # noqa: SIM115 - handed to the process
        self.proc = subprocess.Popen(
            [binary, "--name", self.name, "--data-dir", str(self.data_dir / "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", self.initial_cluster, "--heartbeat-interval", str(HEARTBEAT_MS),
             "--election-timeout", str(ELECTION_TIMEOUT_MS)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()

    def wait_ready(self, timeout_s: float = 20.0) -> Etcd:
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while not _accepts(self.host, self.client_port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"etcd did not start; see {self.data_dir / 'etcd.log'}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Etcd:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class EtcdCluster:
    """``size`` etcd members on loopback ports forming one cluster: a test can stop some
    (``members[i].stop()``) to take its majority away and start them again (same data, same
    ports) to give it back."""

    def __init__(self, data_dir: str | Path, size: int = 3) -> None:
        self.members = [Etcd(Path(data_dir) / f"member-{i}", name=f"skiff-{i}") for i in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for member in self.members:
            member.initial_cluster = initial

    @property
    def endpoints(self) -> str:
        """For controllerEtcdEndpoints."""
        return ",".join(m.endpoint for m in self.members)

    def start(self, timeout_s: float = 30.0) -> EtcdCluster:
        self.start_members(range(len(self.members)), timeout_s)
        return self

    def start_members(self, indexes: Iterable[int], timeout_s: float = 30.0) -> None:
        chosen = [self.members[i] for i in indexes]
        for member in chosen:
            member.launch()
        for member in chosen:
            member.wait_ready(timeout_s)

    def stop(self) -> None:
        for member in self.members:
            member.stop()

    def __enter__(self) -> EtcdCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
