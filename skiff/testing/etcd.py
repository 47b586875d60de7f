"""A real etcd (Debian's ``etcd-server``) on free loopback ports, one member or a cluster of
three, for controller-mode tests and the failover bench (the process runner itself is
``skiff.broker.ha.etcd_process``, which ``skiff up --ha`` uses too).

    with Etcd(tmp_path / "etcd") as etcd:
        etcd.endpoint    # "127.0.0.1:PORT", for controllerEtcdEndpoints
    with EtcdCluster(tmp_path / "etcd", 3) as cluster:
        cluster.endpoints    # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
        cluster.members[0].stop(); cluster.start_members([0])
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from skiff.broker.ha.etcd_process import EtcdProcess, etcd_binary
from skiff.testing.processes import free_port

__all__ = ["Etcd", "EtcdCluster", "etcd_binary"]


class Etcd(EtcdProcess):
    """An `EtcdProcess` on free loopback ports (a client port may still be given)."""

    def __init__(self, data_dir: str | Path, *, client_port: int = 0, host: str = "127.0.0.1",
                 name: str = "skiff") -> None:
        super().__init__(data_dir, client_port=client_port or free_port(host), peer_port=free_port(host),
                         host=host, name=name)

    def start(self, timeout_s: float = 20.0) -> Etcd:
        super().start(timeout_s)
        return self

    def __enter__(self) -> Etcd:
        return self.start()


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
