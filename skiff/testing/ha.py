"""HAGroup: a NameServer, a master and its slaves of one broker name, as real `skiff`
processes on 127.0.0.1, for replication tests and benchmarks.

    with HAGroup(tmp_path, role="SYNC_MASTER", slaves=1) as group:
        group.master_addr, group.slave_addr(1)
        group.kill_master(); group.start_master()
        group.stop_slave(1); group.start_slave(1)
        group.commitlog_bytes("master"), group.commitlog_bytes(1)

Each broker gets an explicit free HA port (the default, listenPort + 1, could be taken
when the listen port is picked at random).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from skiff.testing.processes import SkiffProcess, free_port, start_broker, start_namesrv

GROUP = "broker-a"


class HAGroup:
    def __init__(self, root: str | Path, *, role: str = "ASYNC_MASTER", slaves: int = 1,
                 broker_args: Sequence[str] = (), master_args: Sequence[str] = (),
                 slave_args: Sequence[str] = (), namesrv_host: str = "127.0.0.1",
                 hosts: Mapping[int, str] | None = None, wrappers: Mapping[int, Sequence[str]] | None = None,
                 namesrv_args: Sequence[str] = ()) -> None:
        """``hosts``: the address a broker binds and advertises (brokerIP1), by id (else
        127.0.0.1); ``wrappers``: a command a broker runs under, by id (a network namespace);
        ``namesrv_args``: the NameServer's options (its ``tls.*`` keys)."""
        self.root = Path(root)
        self.namesrv_host = namesrv_host
        self.namesrv_args = list(namesrv_args)
        self.hosts = dict(hosts or {})
        self.wrappers = dict(wrappers or {})
        self.role = role
        self.slave_ids = list(range(1, slaves + 1))
        self.common = list(broker_args)
        self.master_args = list(master_args)
        self.slave_args = list(slave_args)
        self.namesrv: SkiffProcess | None = None
        self.procs: dict[int, SkiffProcess | None] = {}
        self.ports: dict[int, int] = {}
        self.ha_ports: dict[int, int] = {}

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.addr

    def store_dir(self, broker_id: int) -> Path:
        return self.root / ("master" if broker_id == 0 else f"slave-{broker_id}")

    def addr(self, broker_id: int) -> str:
        return f"{self.hosts.get(broker_id, '127.0.0.1')}:{self.ports[broker_id]}"

    @property
    def master_addr(self) -> str:
        return self.addr(0)

    def slave_addr(self, broker_id: int = 1) -> str:
        return self.addr(broker_id)

    def proc(self, broker_id: int) -> SkiffProcess:
        proc = self.procs.get(broker_id)
        assert proc is not None, f"broker {broker_id} is not running"
        return proc

    def start(self) -> Self:
        self.namesrv = start_namesrv(*self.namesrv_args, host=self.namesrv_host)
        self.start_master()
        for i in self.slave_ids:
            self.start_slave(i)
        return self

    def _start(self, broker_id: int, role: str, extra: Sequence[str]) -> SkiffProcess:
        ha_port = self.ha_ports.setdefault(broker_id, free_port())
        proc = start_broker(self.store_dir(broker_id), self.namesrv_addr, f"--brokerId={broker_id}",
                            f"--brokerRole={role}", f"--haListenPort={ha_port}", *self.common, *extra,
                            port=self.ports.get(broker_id, 0), name=GROUP,
                            host=self.hosts.get(broker_id, "127.0.0.1"), wrapper=self.wrappers.get(broker_id, ()))
        self.ports[broker_id] = proc.port
        self.procs[broker_id] = proc
        return proc

    def start_master(self, *extra: str) -> SkiffProcess:
        return self._start(0, self.role, [*self.master_args, *extra])

    def start_slave(self, broker_id: int = 1, *extra: str) -> SkiffProcess:
        return self._start(broker_id, "SLAVE", [*self.slave_args, *extra])

    def stop_broker(self, broker_id: int) -> int:
        code = self.proc(broker_id).stop()
        self.procs[broker_id] = None
        return code

    def kill_broker(self, broker_id: int) -> int:
        code = self.proc(broker_id).kill()
        self.procs[broker_id] = None
        return code

    def commitlog_bytes(self, broker_id: int, start: int = 0, end: int | None = None) -> bytes:
        """The CommitLog of a broker from offset ``start`` (files concatenated, zeros after
        the data included), as its files hold it now."""
        directory = self.store_dir(broker_id) / "commitlog"
        out = bytearray()
        names = sorted(os.listdir(directory))
        if names and int(names[0]) > start:
            raise AssertionError(f"broker {broker_id}'s CommitLog starts at {int(names[0])}, after {start}")
        for name in names:
            file_start = int(name)
            data = (directory / name).read_bytes()
            lo = max(start - file_start, 0)
            if lo < len(data):
                out += data[lo:]
        return bytes(out if end is None else out[: end - start])

    def stop(self) -> None:
        for i, proc in sorted(self.procs.items(), reverse=True):
            if proc is not None and proc.popen.poll() is None:
                proc.stop()
        if self.namesrv is not None:
            self.namesrv.stop()
            self.namesrv = None

    def kill_all(self) -> None:
        for proc in [*self.procs.values(), self.namesrv]:
            if proc is not None and proc.popen.poll() is None:
                proc.kill()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.kill_all()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.kill_all()
        else:
            self.stop()


class ControllerGroup(HAGroup):
    """Brokers 1..n of one brokerName in controller mode on the etcd at ``etcd_endpoint``;
    the election decides which is master."""

    def __init__(self, root: str | Path, etcd_endpoint: str, *, brokers: int = 2, role: str = "SYNC_MASTER",
                 lease_ms: int = 2000, broker_args: Sequence[str] = (), first_is_master: bool = False,
                 **placement: Any) -> None:
        """``first_is_master``: start the others once broker 1 is elected (a test that needs to
        know which broker leads); ``placement``: HAGroup's namesrv_host, hosts, wrappers."""
        super().__init__(root, role=role, slaves=0, broker_args=[
            "--enableControllerMode=true", f"--controllerEtcdEndpoints={etcd_endpoint}",
            f"--controllerLeaseTtl={lease_ms}", *broker_args], **placement)
        self.broker_ids = list(range(1, brokers + 1))
        self.first_is_master = first_is_master

    def store_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def start(self) -> Self:
        self.namesrv = start_namesrv(*self.namesrv_args, host=self.namesrv_host)
        for i in self.broker_ids:
            proc = self.start_broker(i)
            if self.first_is_master and i == self.broker_ids[0]:
                proc.wait_for_line(r"elected master of \S+, epoch 1", 20)
        return self

    def start_broker(self, broker_id: int, *extra: str) -> SkiffProcess:
        return self._start(broker_id, self.role, extra)

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p is not None and p.popen.poll() is None]
