"""Install the peer brokers from Debian's packages when they are missing.

Only the binaries are wanted: the harness runs each broker itself with its own
configuration on loopback ports, never the system service the package sets up.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable

from skiff.bench.compare.servers import RABBIT_SCRIPT, binary

APT_TIMEOUT_S = 900.0

PACKAGE_BINARIES: dict[str, tuple[str, ...]] = {
    "redis-server": ("redis-server",),
    "nats-server": ("nats-server",),
    "rabbitmq-server": (RABBIT_SCRIPT, "epmd"),
}
"""Debian package → the executables the harness runs from it."""


def missing_packages(packages: Iterable[str]) -> list[str]:
    def present(exe: str) -> bool:
        return os.access(exe, os.X_OK) if exe.startswith("/") else binary(exe) is not None

    return [p for p in packages if not all(present(exe) for exe in PACKAGE_BINARIES[p])]


def _apt(*args: str) -> None:
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", *args], check=True, env=env, timeout=APT_TIMEOUT_S,
                   stdout=subprocess.DEVNULL)


def ensure_installed(packages: Iterable[str], allow_install: bool) -> list[str]:
    """Install what is missing (if allowed); return the packages still missing."""
    missing = missing_packages(packages)
    if missing and allow_install:
        print(f"installing from Debian's packages: {' '.join(missing)}", flush=True)
        try:
            _apt("update", "-qq")
            _apt("install", "-y", "-qq", *missing)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            print(f"apt-get failed: {exc}", flush=True)
        missing = missing_packages(missing)
    return missing
