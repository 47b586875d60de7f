"""The chaos run's cluster: three etcd members and three brokers of one group in controller
mode, each in its own network namespace (`lab`), each broker storing on a tmpfs of its own
(so a full disk can be made for one), and a NameServer in the root namespace on the
bridge's address. Blocking methods: the run calls them from a thread, so its clients keep
going while a broker restarts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from types import TracebackType

from skiff.broker.ha.etcd_process import EtcdProcess
from skiff.testing.chaos.lab import Lab, Node
from skiff.testing.failover import all_in_sync, info
from skiff.testing.ha import ControllerGroup

ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
"""Each member has a namespace and an address of its own, so every one takes etcd's ports."""
STORE_TMPFS_BYTES = 192 << 20
"""Each broker's store: room for a long run's CommitLog (8 MiB files) and queues, small enough
to fill at once for the full-disk fault."""
BROKERS = 3
ETCD_MEMBERS = 3


def broker_node(broker_id: int) -> str:
    return f"broker-{broker_id}"


def etcd_node(index: int) -> str:
    return f"etcd-{index}"


class ChaosCluster:
    def __init__(self, root: Path, *, role: str = "SYNC_MASTER", lease_ms: int = 10_000,
                 broker_args: tuple[str, ...] = ()) -> None:
        self.root = root
        self.role = role
        self.lease_ms = lease_ms
        self.broker_args = broker_args
        self.lab = Lab()
        self.etcd: list[EtcdProcess] = []
        self.group: ControllerGroup | None = None
        self.paused: set[int] = set()
        self.mounts: list[Path] = []
        self.logs: dict[str, list[str]] = {}
        """Each broker's output, every process it was (kept across kills and restarts)."""

    @property
    def nodes(self) -> list[str]:
        return [*(broker_node(i) for i in range(1, BROKERS + 1)), *(etcd_node(i) for i in range(ETCD_MEMBERS))]

    @property
    def brokers(self) -> ControllerGroup:
        assert self.group is not None, "the cluster is not started"
        return self.group

    @property
    def namesrv_addr(self) -> str:
        return self.brokers.namesrv_addr

    def start(self) -> ChaosCluster:
        self.lab.open()
        for name in self.nodes:
            self.lab.add(name)
        self._start_etcd()
        hosts = {i: self.lab.nodes[broker_node(i)].ip for i in range(1, BROKERS + 1)}
        wrappers = {i: self.lab.nodes[broker_node(i)].command() for i in hosts}
        self.group = ControllerGroup(self.root, ",".join(m.endpoint for m in self.etcd), brokers=BROKERS,
                                     role=self.role, lease_ms=self.lease_ms, broker_args=self.broker_args,
                                     namesrv_host=self.lab.bridge_ip, hosts=hosts, wrappers=wrappers)
        for i in hosts:
            self._mount_store(self.group.store_dir(i))
        self.group.start()
        return self

    def _start_etcd(self) -> None:
        for i in range(ETCD_MEMBERS):
            node = self.lab.nodes[etcd_node(i)]
            member = EtcdProcess(self.root / f"etcd-{i}", client_port=ETCD_CLIENT_PORT, peer_port=ETCD_PEER_PORT,
                                 host=node.ip, name=etcd_node(i))
            member.wrapper = node.command()
            self.etcd.append(member)
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.etcd)
        for member in self.etcd:
            member.initial_cluster = initial
            member.launch()
        for member in self.etcd:
            member.wait_ready(60)

    def _mount_store(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STORE_TMPFS_BYTES}", "tmpfs", str(directory)],
                       check=True, capture_output=True, timeout=10)
        self.mounts.append(directory)

    # brokers

    def node_of(self, broker_id: int) -> Node:
        return self.lab.nodes[broker_node(broker_id)]

    def master(self) -> int | None:
        """The broker that says it is master in the newest epoch (None: none does). An isolated
        old master still says it is master (fenced, it refuses sends) until it hears of its
        successor, so the epoch decides."""
        return asyncio.run(self._newest_master())

    async def _newest_master(self) -> int | None:
        best: tuple[int, int] | None = None
        for i in self.running():
            if i in self.paused:
                continue
            table = await info(self.brokers.addr(i))
            if table is not None and table["brokerRole"] != "SLAVE":
                epoch = int(table.get("controllerEpoch") or 0)
                best = max(best or (epoch, i), (epoch, i))
        return None if best is None else best[1]

    def in_sync(self) -> bool:
        """A master whose SyncStateSet names every broker."""
        master = self.master()
        return master is not None and asyncio.run(all_in_sync(self.brokers, master))

    def running(self) -> list[int]:
        return self.brokers.running()

    def kill(self, broker_id: int) -> None:
        self.paused.discard(broker_id)
        proc = self.brokers.proc(broker_id)
        self.brokers.kill_broker(broker_id)
        self._keep_log(broker_id, proc.output)

    def restart(self, broker_id: int) -> None:
        """Start a broker that is down (no-op if it runs)."""
        if broker_id not in self.running():
            dead = self.brokers.procs.get(broker_id)
            if dead is not None:
                self._keep_log(broker_id, dead.output)
            self.brokers.procs[broker_id] = None
            self.brokers.start_broker(broker_id)

    def _keep_log(self, broker_id: int, output: str) -> None:
        self.logs.setdefault(broker_node(broker_id), []).append(output)

    def broker_logs(self) -> dict[str, str]:
        """Each broker's output so far, its processes one after another."""
        out = {name: list(parts) for name, parts in self.logs.items()}
        for i, proc in self.brokers.procs.items():
            if proc is not None:
                out.setdefault(broker_node(i), []).append(proc.output)
        return {name: "\n--- restarted ---\n".join(parts) for name, parts in out.items()}

    def exited(self, broker_id: int) -> int | None:
        """A broker process's exit status if it died by itself (a full disk), else None."""
        proc = self.brokers.procs.get(broker_id)
        return None if proc is None else proc.popen.poll()

    def pause(self, broker_id: int) -> None:
        os.kill(self.brokers.proc(broker_id).pid, signal.SIGSTOP)
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        proc = self.brokers.procs.get(broker_id)
        if proc is not None and proc.popen.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        self.paused.discard(broker_id)

    def filler(self, broker_id: int) -> Path:
        return self.brokers.store_dir(broker_id) / "chaos-disk-filler"

    def fill_disk(self, broker_id: int) -> int:
        """Take every free byte of the broker's store; returns how many were taken."""
        path = self.filler(broker_id)
        st = os.statvfs(path.parent)
        free = st.f_bavail * st.f_frsize
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, max(free, 1))
        except OSError:
            pass  # took what there was
        finally:
            os.close(fd)
        return free

    def free_disk(self, broker_id: int) -> None:
        self.filler(broker_id).unlink(missing_ok=True)

    # etcd

    def etcd_leader(self) -> int | None:
        """The index of the member etcd's own status names leader, asked of every member."""
        for i, member in enumerate(self.etcd):
            status = etcd_status(member.endpoint)
            if status is None:
                continue
            for j, other in enumerate(self.etcd):
                other_status = status if j == i else etcd_status(other.endpoint)
                if other_status is not None and other_status["member"] == status["leader"]:
                    return j
        return None

    def kill_etcd(self, index: int) -> None:
        proc = self.etcd[index].proc
        if proc is not None:
            proc.kill()
            proc.wait()
        self.etcd[index].proc = None

    def restart_etcd(self, index: int) -> None:
        if self.etcd[index].proc is None:
            self.etcd[index].launch()
            self.etcd[index].wait_ready(60)

    # the end

    def stop(self) -> None:
        for i in list(self.paused):
            self.resume(i)
        if self.group is not None:
            for proc in self.group.procs.values():
                if proc is not None:
                    proc.signal(signal.SIGTERM)  # all at once: each drains in parallel, then each is awaited
            try:
                self.group.stop()
            except AssertionError:
                self.group.kill_all()
        for member in self.etcd:
            member.stop()
        for directory in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=10)
        self.mounts.clear()
        self.lab.close()

    def kill_all(self) -> None:
        for i in list(self.paused):
            self.resume(i)
        if self.group is not None:
            self.group.kill_all()
        for i in range(len(self.etcd)):
            self.kill_etcd(i)
        self.stop()

    def __enter__(self) -> ChaosCluster:
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


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def etcd_status(endpoint: str) -> dict[str, str] | None:
    """A member's id and the leader it knows (etcd's JSON gateway), or None if it does not answer."""
    request = urllib.request.Request(f"http://{endpoint}/v3/maintenance/status", data=b"{}", method="POST")
    try:
        with _DIRECT.open(request, timeout=1.0) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):
        return None
    return {"member": str(body.get("header", {}).get("member_id", "")), "leader": str(body.get("leader", ""))}
