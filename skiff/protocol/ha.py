"""RocketMQ's classic HA stream (4.x `HAService` / `HAConnection`), sans-IO.

A raw TCP stream on the master's ``haListenPort``: no handshake, no magic, big-endian.

Slave → master: an endless run of offset reports.

| offset | size | field |
|---|---|---|
| 0 | 8 | int64: the slave's max physical CommitLog offset (the next byte it wants) |

Master → slave: frames.

| offset | size | field |
|---|---|---|
| 0 | 8 | int64: physical offset of the first body byte |
| 8 | 4 | int32: body size (0: a heartbeat) |
| 12 | size | raw CommitLog bytes |

A frame may end inside a record (the master cuts at ``haTransferBatchSize`` and at
file ends): the slave appends the whole records and keeps the rest for the next frame
(`MessageStore.append_replicated` with ``hold_partial``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from skiff.common.errors import DecodeError

REPORT = struct.Struct(">q")
FRAME_HEAD = struct.Struct(">qi")
assert REPORT.size == 8 and FRAME_HEAD.size == 12

MAX_FRAME_BODY = 64 << 20
"""Largest frame body a slave accepts (RocketMQ's masters send at most haTransferBatchSize,
32 KiB by default); a bigger size means the stream is not an HA stream."""


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_frame_head(offset: int, size: int) -> bytes:
    return FRAME_HEAD.pack(offset, size)


class ReportReader:
    """Collects a slave's reports; only the newest whole one matters (queued reports collapse)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The newest complete report in what has arrived, or None if none completed."""
        buf = self._pending + data
        whole = len(buf) - len(buf) % REPORT.size
        self._pending = buf[whole:]
        if not whole:
            return None
        offset: int = REPORT.unpack_from(buf, whole - REPORT.size)[0]
        if offset < 0:
            raise DecodeError(f"a slave reported the negative offset {offset}")
        return offset


class Frame(NamedTuple):
    offset: int
    body: memoryview
    """A piece of a frame's body: the bytes at CommitLog ``offset`` (empty: a heartbeat)."""


class FrameReader:
    """Cuts the master's stream into frame bodies, handed out as they arrive.

    A body cut by a read comes out in pieces, each with its own offset, as zero-copy
    slices of the data read: the slave only needs CommitLog bytes in order, not frames."""

    def __init__(self) -> None:
        self._head = b""
        """The front of a frame header cut by a read."""
        self._offset = 0
        self._left = 0
        """Body bytes of the current frame still to come, at ``_offset``."""

    def feed(self, data: bytes) -> Iterator[Frame]:
        view = memoryview(data)
        pos, end = 0, len(view)
        while pos < end:
            if self._left:
                take = min(self._left, end - pos)
                yield Frame(self._offset, view[pos : pos + take])
                self._offset += take
                self._left -= take
                pos += take
                continue
            need = FRAME_HEAD.size - len(self._head)
            if end - pos < need:
                self._head += bytes(view[pos:])
                return
            offset, size = FRAME_HEAD.unpack(self._head + bytes(view[pos : pos + need]))
            self._head = b""
            pos += need
            if size < 0 or size > MAX_FRAME_BODY or offset < 0:
                raise DecodeError(f"bad HA frame header: offset {offset}, size {size}")
            self._offset, self._left = offset, size
            if not size:
                yield Frame(offset, view[pos:pos])
