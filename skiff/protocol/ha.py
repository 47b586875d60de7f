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
file ends), so the slave's `RecordAssembler` hands the store whole records only.
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

_RECORD_SIZE = struct.Struct(">i")


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
    body: bytes


class FrameReader:
    """Cuts the master's stream into frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[Frame]:
        self._buf += data
        pos = 0
        buf = self._buf
        while len(buf) - pos >= FRAME_HEAD.size:
            offset, size = FRAME_HEAD.unpack_from(buf, pos)
            if size < 0 or size > MAX_FRAME_BODY or offset < 0:
                raise DecodeError(f"bad HA frame header: offset {offset}, size {size}")
            end = pos + FRAME_HEAD.size + size
            if len(buf) < end:
                break
            yield Frame(offset, bytes(buf[pos + FRAME_HEAD.size : end]))
            pos = end
        del buf[:pos]


class RecordAssembler:
    """Joins frame bodies into runs of whole CommitLog records and blanks.

    ``file_size`` is the slave's mappedFileSizeCommitLog (it must equal the master's:
    a blank record covers the rest of its file). `feed` returns (offset, bytes) of the
    longest prefix of whole units received so far; the tail waits for the next frame.
    """

    def __init__(self, file_size: int, start: int) -> None:
        self.file_size = file_size
        self.start = start
        """CommitLog offset of the first byte held."""
        self._buf = bytearray()

    @property
    def end(self) -> int:
        """The offset after the last byte received (what the stream continues from)."""
        return self.start + len(self._buf)

    def feed(self, offset: int, body: bytes) -> tuple[int, bytes]:
        if offset != self.end:
            raise DecodeError(f"the master sent offset {offset}, the slave expects {self.end}")
        self._buf += body
        whole = self._whole_prefix()
        start = self.start
        out = bytes(self._buf[:whole])
        del self._buf[:whole]
        self.start += whole
        return start, out

    def _whole_prefix(self) -> int:
        buf = self._buf
        pos = 0
        while len(buf) - pos >= _RECORD_SIZE.size:
            size = _RECORD_SIZE.unpack_from(buf, pos)[0]
            room = self.file_size - (self.start + pos) % self.file_size
            if size <= 0 or size > room:
                raise DecodeError(f"a record of {size} bytes at offset {self.start + pos} does not fit its file")
            if len(buf) - pos < size:
                break
            pos += size
        return pos
