"""Message ids: the broker's offsetMsgId and the client's UNIQ_KEY.

offsetMsgId = store host (IPv4 4 bytes + port as int32) + CommitLog offset
(int64), all big-endian, as 32 uppercase hex digits (56 with an IPv6 host). A
broker can find a message from it; clients treat UNIQ_KEY as opaque.

UNIQ_KEY = ip (4) + pid (2) + random (4) + ms since the start of the month (4)
+ counter (2), big-endian, 32 uppercase hex digits, as Java's client forms it.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import socket
import struct
import threading
import time
from datetime import datetime, timezone
from typing import NamedTuple

from skiff.common.errors import DecodeError

_OFFSET = struct.Struct(">q")


def create_offset_msg_id(store_host_packed: bytes, physical_offset: int) -> str:
    return (bytes(store_host_packed) + _OFFSET.pack(physical_offset)).hex().upper()


class OffsetMsgId(NamedTuple):
    host: str
    port: int
    physical_offset: int

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Split an offsetMsgId into store host, port and CommitLog offset."""
    if len(msg_id) not in (32, 56):
        raise DecodeError(f"not an offsetMsgId (length {len(msg_id)}): {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise DecodeError(f"not an offsetMsgId (not hex): {msg_id!r}") from exc
    ip_len = len(raw) - 12
    host = str(ipaddress.ip_address(raw[:ip_len]))
    port = int.from_bytes(raw[ip_len : ip_len + 4], "big", signed=True)
    return OffsetMsgId(host, port, _OFFSET.unpack_from(raw, ip_len + 4)[0])


def _local_ip_bytes() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return b"\x7f\x00\x00\x01"


def _month_bounds_ms(now_ms: int) -> tuple[int, int]:
    """Start of this UTC month and of the next one, in ms."""
    now = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """Makes UNIQ_KEY ids; thread-safe and cheap: the prefix and the time part are
    formatted once per millisecond, so an id is a counter step and one format."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None) -> None:
        prefix = (ip or _local_ip_bytes())[:4] + struct.pack(
            ">HI", (pid if pid is not None else os.getpid()) & 0xFFFF, random.getrandbits(32)
        )
        self._prefix_hex = prefix.hex().upper()
        self._counter = itertools.count(random.getrandbits(16))
        self._lock = threading.Lock()
        self._month_start_ms = 0
        self._next_month_ms = 0
        self._time_ms = -1
        self._time_hex = ""
        """The id's time part for ``_time_ms``: a producer makes many ids per millisecond."""

    def next_id(self) -> str:
        return f"{self._time_prefix()}{next(self._counter) & 0xFFFF:04X}"

    def take(self, n: int) -> tuple[str, list[int]]:
        """``n`` ids at once, for a writer that formats them column-wise: their common first 28
        hex digits and each one's counter (an id is the prefix and ``f"{counter & 0xFFFF:04X}"``).
        The counters are taken in one C-level call, so no other thread's id falls among them."""
        return self._time_prefix(), list(itertools.islice(self._counter, n))

    def _time_prefix(self) -> str:
        now_ms = time.time_ns() // 1_000_000
        if now_ms != self._time_ms:
            if now_ms >= self._next_month_ms:
                with self._lock:
                    self._month_start_ms, self._next_month_ms = _month_bounds_ms(now_ms)
            self._time_hex = f"{self._prefix_hex}{(now_ms - self._month_start_ms) & 0xFFFFFFFF:08X}"
            self._time_ms = now_ms
        return self._time_hex


UNIQ_IDS = UniqIdGenerator()
