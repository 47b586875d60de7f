"""A Linux network namespace joined to the root one by a veth pair, for partition tests:
a process started under ``ns.command(...)`` lives behind the pair, and ``ns.cut()``
takes both ends down, so every packet between it and the rest of the machine is lost
(no reset, no refusal: a real partition, unlike a dead process).

    with Netns() as ns:        # needs root (CAP_NET_ADMIN); see netns_unavailable()
        ns.root_ip, ns.ns_ip   # the pair's addresses: root side, namespace side
        ns.command(["python", ...])
        ns.cut(); ns.heal()

Namespaces and links are named after the test process, deleted on exit and at
interpreter exit even when a test fails.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import subprocess
from collections.abc import Sequence
from types import TracebackType

_counter = itertools.count()
_live: set[Netns] = set()


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message has its output."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def netns_unavailable() -> str | None:
    """Why a test cannot make network namespaces here (a skip reason), or None."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN); run the suite as root"
    try:
        with Netns():
            pass
    except NetnsError as exc:
        return f"cannot create a network namespace with a veth pair: {exc}"
    return None


class Netns:
    def __init__(self) -> None:
        n = next(_counter)
        pid = os.getpid()
        self.name = f"skiff-{pid}-{n}"
        self.root_dev = f"sk{pid % 100000}x{n}a"  # interface names: at most 15 characters
        self.ns_dev = f"sk{pid % 100000}x{n}b"
        block = (pid * 8 + n) % (1 << 16)  # a /30 of 10.200.0.0/14 per (process, namespace)
        base = (10 << 24) | (200 << 16) | (block << 2)
        self.root_ip = _dotted(base + 1)
        self.ns_ip = _dotted(base + 2)

    def create(self) -> Netns:
        _live.add(self)
        try:
            _ip("netns", "add", self.name)
            _ip("link", "add", self.root_dev, "type", "veth", "peer", "name", self.ns_dev, "netns", self.name)
            _ip("addr", "add", f"{self.root_ip}/30", "dev", self.root_dev)
            self._in_ns("addr", "add", f"{self.ns_ip}/30", "dev", self.ns_dev)
            self._in_ns("link", "set", "lo", "up")
            self.heal()
        except BaseException:
            self.delete()
            raise
        return self

    def _in_ns(self, *args: str) -> None:
        _ip("-n", self.name, *args)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.name, *argv]

    def cut(self) -> None:
        """Both ends down: packets either way are dropped, connections hang."""
        _ip("link", "set", self.root_dev, "down")
        self._in_ns("link", "set", self.ns_dev, "down")

    def heal(self) -> None:
        _ip("link", "set", self.root_dev, "up")
        self._in_ns("link", "set", self.ns_dev, "up")

    def delete(self) -> None:
        """Remove the namespace and the pair (processes still inside keep it alive until
        they exit: stop them first)."""
        _ip("link", "del", self.root_dev, check=False)
        _ip("netns", "del", self.name, check=False)
        _live.discard(self)

    def __enter__(self) -> Netns:
        return self.create()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.delete()


def _dotted(value: int) -> str:
    return ".".join(str((value >> shift) & 255) for shift in (24, 16, 8, 0))


@atexit.register
def _delete_leftovers() -> None:
    for ns in list(_live):
        ns.delete()
