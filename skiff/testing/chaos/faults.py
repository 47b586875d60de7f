"""The faults of a chaos run, OpenChaos's set for a broker group in controller mode. Each is
injected (`inject` returns the nodes it hit and a detail for the history) and recovered
(`recover`, which also says what it found: a broker that died of a full disk, say).
Kill faults restart what they killed on recovery; a pause is resumed; a partition healed.

| name | what |
|---|---|
| kill-master | kill -9 of the master broker |
| kill-minority | kill -9 of one broker, any |
| kill-majority | kill -9 of two brokers, any |
| pause-master, pause-slave | SIGSTOP (sockets stay open), SIGCONT on recovery |
| partition-master | the master cut from the other brokers and every etcd member (clients and the |
|   | NameServer still reach it) |
| partition-random | the six nodes split into two random halves |
| partition-ring | brokers and etcd members on a ring, each cut from the node opposite (each still sees a majority) |
| netem-loss, netem-delay | 20 % loss / 200 ms ± 50 ms on the master's link (needs the kernel's netem) |
| disk-full-slave | a slave's store filled to its last byte |
| kill-etcd-leader | kill -9 of etcd's leader, restarted on recovery |
"""

from __future__ import annotations

import random
import signal
from typing import Protocol

from skiff.testing.chaos.cluster import BROKERS, ChaosCluster, broker_node, etcd_node
from skiff.testing.chaos.lab import netem_unavailable
from skiff.testing.waits import wait_for

MASTER_WAIT_S = 15.0
"""How long a fault aimed at the master waits for one (after a previous fault) before it
takes any broker and says so."""


class Fault(Protocol):
    name: str

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        """Hit the cluster; the nodes hit and a detail for the history."""

    def recover(self, cluster: ChaosCluster) -> str:
        """Undo the fault; a detail for the history."""


def master_or_any(cluster: ChaosCluster, rng: random.Random) -> tuple[int, str]:
    try:
        master = wait_for(cluster.master, MASTER_WAIT_S, "a master")
    except AssertionError:
        master = None
    if master is None:
        return rng.choice(cluster.running() or list(range(1, BROKERS + 1))), "no master: any broker"
    return master, "master"


def a_slave(cluster: ChaosCluster, rng: random.Random) -> tuple[int, str]:
    master, _ = master_or_any(cluster, rng)
    others = [i for i in cluster.running() if i != master]
    return (rng.choice(others), "slave") if others else (master, "no slave running: the master")


class Kill:
    """kill -9 of ``count`` brokers (the master when ``master``), restarted on recovery."""

    def __init__(self, name: str, count: int = 1, master: bool = False) -> None:
        self.name, self.count, self.master = name, count, master
        self.killed: list[int] = []

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        if self.master:
            target, why = master_or_any(cluster, rng)
            self.killed = [target]
        else:
            self.killed, why = rng.sample(range(1, BROKERS + 1), self.count), "any"
        for i in self.killed:
            if i in cluster.running():
                cluster.kill(i)
        return [broker_node(i) for i in self.killed], why

    def recover(self, cluster: ChaosCluster) -> str:
        """Restart every killed broker, even after one fails to start: a failure that left the
        others down made the next fault kill the last broker standing (runs P and Q). One after
        the other: started together on this 2-core machine at load 10, both came up later than
        the first of two in turn (run S), and the first one up is what ends the outage."""
        failed: list[str] = []
        for i in self.killed:
            try:
                cluster.restart(i)
            except Exception as exc:  # noqa: BLE001 - reported after the others are back
                failed.append(f"{broker_node(i)}: {exc}")
        if failed:
            raise RuntimeError("; ".join(failed))
        return "restarted"


class Pause:
    """SIGSTOP of the master or of a slave, SIGCONT on recovery."""

    def __init__(self, name: str, master: bool) -> None:
        self.name, self.master = name, master
        self.target = 0

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        self.target, why = master_or_any(cluster, rng) if self.master else a_slave(cluster, rng)
        cluster.pause(self.target)
        return [broker_node(self.target)], why

    def recover(self, cluster: ChaosCluster) -> str:
        cluster.resume(self.target)
        return "resumed"


class Partition:
    """``kind``: master (the master alone against the other nodes), random (two random halves),
    ring (each node cut from the one opposite on a ring of brokers and etcd members)."""

    def __init__(self, name: str, kind: str) -> None:
        self.name, self.kind = name, kind

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        nodes = cluster.nodes
        if self.kind == "master":
            target, why = master_or_any(cluster, rng)
            alone = broker_node(target)
            cluster.lab.partition([alone], [n for n in nodes if n != alone])
            return [alone], why
        if self.kind == "random":
            shuffled = rng.sample(nodes, len(nodes))
            half = rng.randint(1, len(nodes) - 1)
            cluster.lab.partition(shuffled[:half], shuffled[half:])
            return shuffled[:half], f"against {','.join(shuffled[half:])}"
        ring = [n for pair in zip((broker_node(i) for i in range(1, BROKERS + 1)),
                                  (etcd_node(i) for i in range(BROKERS))) for n in pair]
        for i in range(len(ring) // 2):
            cluster.lab.cut(ring[i], ring[i + len(ring) // 2])
        return ring, "each cut from the node opposite"

    def recover(self, cluster: ChaosCluster) -> str:
        cluster.lab.heal()
        return "healed"


class Netem:
    """Loss or delay on the master's link."""

    def __init__(self, name: str, *spec: str) -> None:
        self.name, self.spec = name, spec
        self.node = ""

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        target, why = master_or_any(cluster, rng)
        self.node = broker_node(target)
        cluster.lab.netem(self.node, *self.spec)
        return [self.node], f"{why}: netem {' '.join(self.spec)}"

    def recover(self, cluster: ChaosCluster) -> str:
        cluster.lab.clear_netem(self.node)
        return "cleared"


class DiskFull:
    """A slave's store filled; freed on recovery, and the broker restarted if it died of it."""

    name = "disk-full-slave"

    def __init__(self) -> None:
        self.target = 0

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        self.target, why = a_slave(cluster, rng)
        taken = cluster.fill_disk(self.target)
        return [broker_node(self.target)], f"{why}: {taken} bytes taken"

    def recover(self, cluster: ChaosCluster) -> str:
        cluster.free_disk(self.target)
        code = cluster.exited(self.target)
        detail = "freed" if code is None else f"freed; the broker had exited with {exit_name(code)}"
        cluster.restart(self.target)
        return detail


class KillEtcdLeader:
    name = "kill-etcd-leader"

    def __init__(self) -> None:
        self.target: int | None = None

    def inject(self, cluster: ChaosCluster, rng: random.Random) -> tuple[list[str], str]:
        self.target = cluster.etcd_leader()
        why = "leader"
        if self.target is None:
            self.target, why = rng.randrange(len(cluster.etcd)), "no leader known: any member"
        cluster.kill_etcd(self.target)
        return [etcd_node(self.target)], why

    def recover(self, cluster: ChaosCluster) -> str:
        assert self.target is not None
        cluster.restart_etcd(self.target)
        return "restarted"


def exit_name(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"


def all_faults() -> dict[str, Fault]:
    faults: list[Fault] = [
        Kill("kill-master", master=True), Kill("kill-minority", 1), Kill("kill-majority", 2),
        Pause("pause-master", master=True), Pause("pause-slave", master=False),
        Partition("partition-master", "master"), Partition("partition-random", "random"),
        Partition("partition-ring", "ring"),
        Netem("netem-loss", "loss", "20%"), Netem("netem-delay", "delay", "200ms", "50ms"),
        DiskFull(), KillEtcdLeader(),
    ]
    return {f.name: f for f in faults}


NETEM_FAULTS = ("netem-loss", "netem-delay")


def runnable(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The faults of ``names`` this machine can inject, and why each other one is not run."""
    skipped = {}
    reason = netem_unavailable() if any(n in NETEM_FAULTS for n in names) else None
    if reason is not None:
        skipped = {n: reason for n in names if n in NETEM_FAULTS}
    return [n for n in names if n not in skipped], skipped
