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

import json
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from skiff.broker.ha.etcd_process import EtcdProcess, etcd_binary
from skiff.testing.processes import free_port

__all__ = ["Etcd", "EtcdCluster", "etcd_binary"]

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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

    def leader(self) -> int | None:
        """The index of the member that etcd's status (its JSON gateway) names leader, or None
        while no member that answers knows one."""
        ids: dict[str, int] = {}
        leaders = set()
        for i in range(len(self.members)):
            body = self._gateway(i, "maintenance/status", {})
            if body is not None:
                ids[str(body.get("header", {}).get("member_id", ""))] = i
                leaders.add(str(body.get("leader", "")))
        known = [ids[leader] for leader in leaders if leader in ids]
        return known[0] if len(known) == 1 else None

    def make_leader(self, index: int) -> bool:
        """Ask the leader to hand leadership to member ``index``; True once it is leader."""
        leader = self.leader()
        if leader is None or leader == index:
            return leader == index
        target = self._gateway(index, "maintenance/status", {})
        if target is None:
            return False
        self._gateway(leader, "maintenance/transfer-leadership", {"targetID": target["header"]["member_id"]})
        return self.leader() == index

    def _gateway(self, index: int, path: str, body: dict[str, object]) -> dict[str, Any] | None:
        request = urllib.request.Request(f"http://{self.members[index].endpoint}/v3/{path}",
                                         data=json.dumps(body).encode(), method="POST")
        try:
            with _DIRECT.open(request, timeout=2.0) as response:
                answer = json.loads(response.read())
        except (OSError, ValueError):
            return None
        return answer if isinstance(answer, dict) else None

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
