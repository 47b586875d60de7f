"""A real single-member etcd (Debian's ``etcd-server``) on free loopback ports, for
controller-mode tests and ``skiff up --ha``.

    with Etcd(tmp_path / "etcd") as etcd:
        etcd.endpoint    # "127.0.0.1:PORT", for controllerEtcdEndpoints
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from skiff.testing.processes import free_port

ELECTION_TIMEOUT_MS = 500
HEARTBEAT_MS = 50


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class Etcd:
    def __init__(self, data_dir: str | Path, *, client_port: int = 0, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.client_port = client_port or free_port(host)
        self.peer_port = free_port(host)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.client_port}"

    def start(self, timeout_s: float = 20.0) -> Etcd:
        binary = etcd_binary()
        if binary is None:
            raise FileNotFoundError("etcd is not installed (Debian: apt-get install etcd-server; make etcd)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        client = f"http://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        log = open(self.data_dir / "etcd.log", "ab")  # noqa: SIM115 - handed to the process
        self.proc = subprocess.Popen(
            [binary, "--name", "skiff", "--data-dir", str(self.data_dir / "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"skiff={peer}", "--heartbeat-interval", str(HEARTBEAT_MS),
             "--election-timeout", str(ELECTION_TIMEOUT_MS)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
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


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
