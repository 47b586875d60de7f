"""An etcd member (Debian's ``etcd-server``) run as a child process: `skiff up --ha` needs one
to elect its master through, and the test harness (``skiff.testing.etcd``) builds its
free-port members and three-member clusters on this class, so there is one way to run etcd.
It lives with the controller mode it serves, below both of its users.

The member runs in a session of its own: a Ctrl+C in the terminal reaches the supervisor,
which stops the brokers first (they hand back their leases) and etcd last."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from skiff.common.errors import SkiffError

ELECTION_TIMEOUT_MS = 500
HEARTBEAT_MS = 50
"""Short timings so an election after a stopped member takes well under a second on loopback."""


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class EtcdProcess:
    """One etcd member on given ports; alone (the default) it is a cluster of one. A member of
    several gets its peers through ``initial_cluster`` before it is launched."""

    def __init__(self, data_dir: str | Path, *, client_port: int, peer_port: int, host: str = "127.0.0.1",
                 name: str = "skiff") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.name = name
        self.client_port = client_port
        self.peer_port = peer_port
        self.initial_cluster = f"{name}={self.peer_url}"
        self.wrapper: list[str] = []
        """A command the member runs under (``ip netns exec NAME``: a chaos run's namespace)."""
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """For controllerEtcdEndpoints."""
        return f"{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "etcd.log"

    def start(self, timeout_s: float = 20.0) -> EtcdProcess:
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start the process (a member of several waits for its peers: launch them all, then wait)."""
        binary = etcd_binary()
        if binary is None:
            raise SkiffError("etcd is not installed (Debian: apt-get install etcd-server, or `make etcd`)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        client = f"http://{self.host}:{self.client_port}"
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the process
        self.proc = subprocess.Popen(
            [*self.wrapper, binary, "--name", self.name, "--data-dir", str(self.data_dir / "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", self.initial_cluster, "--heartbeat-interval", str(HEARTBEAT_MS),
             "--election-timeout", str(ELECTION_TIMEOUT_MS)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()

    def wait_ready(self, timeout_s: float = 20.0) -> EtcdProcess:
        """Until the client port answers as an etcd (``/version``, which needs no quorum, so a
        member restarted without its peers is ready too); a process that exits (a port in use,
        say) or stays silent past the deadline is stopped and reported with its log's place."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while not _answers_as_etcd(self.host, self.client_port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SkiffError(f"etcd did not start on {self.endpoint} (peer port {self.peer_port}); "
                                 f"see {self.log_path}")
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

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""A local member is never reached through an http_proxy of the environment."""


def _answers_as_etcd(host: str, port: int) -> bool:
    """Something else listening on the port (an error for this member) does not count."""
    try:
        with _DIRECT.open(f"http://{host}:{port}/version", timeout=0.5) as response:
            return b"etcdserver" in response.read()
    except (OSError, ValueError):
        return False
