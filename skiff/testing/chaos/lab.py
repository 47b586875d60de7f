"""The chaos run's network: a bridge in the root namespace and one Linux network namespace
per node (each broker, each etcd member), joined to the bridge by a veth pair. The
NameServer and the clients stay in the root namespace and reach every node through the
bridge's address.

Faults on the network:

- a **partition** between sets of nodes routes each side's packets for the other through a
  gateway that does not exist on the bridge: they are dropped unanswered (the neighbour
  lookup fails), so connections hang and new ones time out; nothing refuses a connection,
  as on a real cut. The root namespace (clients, NameServer) keeps reaching every node.
- **netem** loss or delay on a node's link, when the kernel has the netem qdisc
  (`netem_unavailable` says why not, and such faults are then not run).

Namespaces, links and routes are named after the process and removed on `close` and at
interpreter exit, also after a failure."""

from __future__ import annotations

import atexit
import itertools
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from skiff.testing.netns import NetnsError

SUBNET_SECOND_OCTET = 210
"""Nodes live in 10.210.X.0/24, X from the process id (netns.py's pairs use 10.200.0.0/14)."""
FIRST_NODE_HOST = 10
DEAD_GATEWAY_HOST = 250
"""A bridge address nobody holds: a partitioned node's packets are routed to it and vanish."""

_live: set[Lab] = set()
_counter = itertools.count()


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["tc", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise NetnsError(f"tc {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    netns: str
    ip: str
    dev: str
    """The namespace's end of the pair (netem goes on it)."""

    def command(self, argv: Sequence[str] = ()) -> list[str]:
        """``argv`` run inside the node's namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.netns, *argv]


class Lab:
    """The bridge and the nodes; ``with Lab() as lab: lab.add("broker-1")``."""

    def __init__(self) -> None:
        pid, n = os.getpid(), next(_counter)
        self.tag = f"{pid % 100000}{'abcdefgh'[n % 8]}"
        self.bridge = f"skb{self.tag}"
        self.prefix = f"10.{SUBNET_SECOND_OCTET}.{(pid * 8 + n) % 256}"
        self.bridge_ip = f"{self.prefix}.1"
        self.nodes: dict[str, Node] = {}
        self._cut: set[tuple[str, str]] = set()

    def open(self) -> Lab:
        _live.add(self)
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def add(self, name: str) -> Node:
        i = len(self.nodes)
        node = Node(name, f"skiff-chaos-{self.tag}-{name}", f"{self.prefix}.{FIRST_NODE_HOST + i}", f"skn{self.tag}{i}")
        root_dev = f"skr{self.tag}{i}"
        self.nodes[name] = node
        ip("netns", "add", node.netns)
        ip("link", "add", root_dev, "type", "veth", "peer", "name", node.dev, "netns", node.netns)
        ip("link", "set", root_dev, "master", self.bridge)
        ip("link", "set", root_dev, "up")
        ip("-n", node.netns, "addr", "add", f"{node.ip}/24", "dev", node.dev)
        ip("-n", node.netns, "link", "set", node.dev, "up")
        ip("-n", node.netns, "link", "set", "lo", "up")
        return node

    def partition(self, *sides: Iterable[str]) -> None:
        """Cut every node of each side from every node of the other sides (both ways)."""
        groups = [list(side) for side in sides]
        for a, b in itertools.combinations(groups, 2):
            for x in a:
                for y in b:
                    self.cut(x, y)

    def cut(self, a: str, b: str) -> None:
        for x, y in ((a, b), (b, a)):
            if (x, y) not in self._cut:
                ip("-n", self.nodes[x].netns, "route", "add", f"{self.nodes[y].ip}/32",
                   "via", f"{self.prefix}.{DEAD_GATEWAY_HOST}")
                self._cut.add((x, y))

    def heal(self) -> None:
        for x, y in sorted(self._cut):
            ip("-n", self.nodes[x].netns, "route", "del", f"{self.nodes[y].ip}/32", check=False)
            ip("-n", self.nodes[x].netns, "neigh", "flush", "dev", self.nodes[x].dev, check=False)
        self._cut.clear()

    def netem(self, name: str, *spec: str) -> None:
        """``netem(node, "loss", "20%")`` or ``("delay", "200ms", "50ms")`` on the node's link."""
        node = self.nodes[name]
        tc("-n", node.netns, "qdisc", "replace", "dev", node.dev, "root", "netem", *spec)

    def clear_netem(self, name: str) -> None:
        node = self.nodes[name]
        tc("-n", node.netns, "qdisc", "del", "dev", node.dev, "root", check=False)

    def close(self) -> None:
        """Remove the namespaces (their links go with them) and the bridge; stop the processes
        inside first, or a namespace lives on until they exit."""
        for node in self.nodes.values():
            ip("netns", "del", node.netns, check=False)
        ip("link", "del", self.bridge, check=False)
        _live.discard(self)

    def __enter__(self) -> Lab:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


def netem_unavailable() -> str | None:
    """Why netem faults cannot run here (the kernel has no netem qdisc), or None."""
    probe = f"sknetem{os.getpid() % 100000}"
    try:
        ip("link", "add", probe, "type", "veth", "peer", "name", f"{probe}p")
    except NetnsError as exc:
        return f"cannot make a link to probe netem on: {exc}"
    try:
        done = tc("qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms", check=False)
        return None if done.returncode == 0 else f"tc netem: {done.stderr.strip()}"
    finally:
        ip("link", "del", probe, check=False)


@atexit.register
def _close_leftovers() -> None:
    for lab in list(_live):
        lab.close()
