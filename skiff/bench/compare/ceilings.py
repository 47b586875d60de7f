"""The machine's own limits, measured in the same run as the brokers.

- sequential write bandwidth of the data directory, `dd bs=1M` style, once
  into the page cache and once with an fsync at the end counted in the time
  (after an untimed pass of the same size: a cold first pass pays for page
  allocation and measured half as fast here);
- fsyncs per second: a loop of small appends each followed by fsync, the
  bound of any fsync-per-write durability setting;
- loopback socket bandwidth: one TCP connection over 127.0.0.1 carrying
  large sends, the bound of any client-broker pair on this host.

Every loop is bounded in bytes or count and in time.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from skiff.bench.compare.procs import LOOPBACK
from skiff.bench.compare.results import MB, Ceilings

BLOCK_BYTES = 1 << 20
FSYNC_RECORD_BYTES = 128
SOCKET_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class CeilingSizes:
    disk_bytes: int
    fsync_max_count: int
    fsync_max_s: float
    socket_bytes: int

    @classmethod
    def full(cls) -> CeilingSizes:
        return cls(disk_bytes=1 << 30, fsync_max_count=5000, fsync_max_s=3.0, socket_bytes=4 << 30)

    @classmethod
    def smoke(cls) -> CeilingSizes:
        return cls(disk_bytes=16 << 20, fsync_max_count=200, fsync_max_s=0.5, socket_bytes=64 << 20)


def disk_write_mb_per_s(directory: Path, total_bytes: int, fsync: bool) -> float:
    """Write ``total_bytes`` in 1 MiB blocks to a new file; with ``fsync``, include the final fsync."""
    path = directory / "ceiling-dd.bin"
    block = os.urandom(BLOCK_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t0 = time.perf_counter()
        for _ in range(max(1, total_bytes // BLOCK_BYTES)):
            os.write(fd, block)
        if fsync:
            os.fsync(fd)
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return total_bytes / elapsed / MB


def fsyncs_per_s(directory: Path, max_count: int, max_s: float) -> float:
    """Small append + fsync, repeated until ``max_count`` or ``max_s``."""
    path = directory / "ceiling-fsync.bin"
    record = b"x" * FSYNC_RECORD_BYTES
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        t0 = time.perf_counter()
        n = 0
        while n < max_count and time.perf_counter() - t0 < max_s:
            os.write(fd, record)
            os.fsync(fd)
            n += 1
        elapsed = time.perf_counter() - t0
    finally:
        os.close(fd)
        path.unlink()
    return n / elapsed


def loopback_mb_per_s(total_bytes: int) -> float:
    """One TCP connection over 127.0.0.1: a thread sends, this thread receives."""
    with socket.create_server((LOOPBACK, 0)) as server:
        sender_sock = socket.create_connection(server.getsockname())
        receiver, _ = server.accept()
    chunk = bytes(SOCKET_CHUNK_BYTES)

    def send_all() -> None:
        with sender_sock:
            for _ in range(total_bytes // SOCKET_CHUNK_BYTES):
                sender_sock.sendall(chunk)

    buf = bytearray(SOCKET_CHUNK_BYTES)
    received = 0
    with receiver:
        t0 = time.perf_counter()
        sender = threading.Thread(target=send_all, name="loopback-sender", daemon=True)
        sender.start()
        while (n := receiver.recv_into(buf)) > 0:
            received += n
        elapsed = time.perf_counter() - t0
    sender.join(timeout=10)
    return received / elapsed / MB


def measure(directory: Path, sizes: CeilingSizes) -> Ceilings:
    directory.mkdir(parents=True, exist_ok=True)
    disk_write_mb_per_s(directory, sizes.disk_bytes, fsync=False)  # warm-up: the first pass pays page allocation
    return Ceilings(
        disk_write_mb_per_s=disk_write_mb_per_s(directory, sizes.disk_bytes, fsync=False),
        disk_write_fsync_mb_per_s=disk_write_mb_per_s(directory, sizes.disk_bytes, fsync=True),
        disk_write_bytes=sizes.disk_bytes,
        fsyncs_per_s=fsyncs_per_s(directory, sizes.fsync_max_count, sizes.fsync_max_s),
        loopback_mb_per_s=loopback_mb_per_s(sizes.socket_bytes),
    )
