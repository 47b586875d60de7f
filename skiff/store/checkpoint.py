"""The checkpoint file, the abort marker and the store's lock file.

`checkpoint` says how far the store's files are known durable. It is replaced
atomically (written to ``checkpoint.tmp``, fsynced, renamed), so a crash leaves
either the old or the new one. Layout (big-endian, ``CHECKPOINT``):

| offset | size | field                                                         |
|--------|------|---------------------------------------------------------------|
| 0      | 4    | magic 0x534B4350 ("SKCP")                                     |
| 4      | 4    | version (1)                                                   |
| 8      | 8    | CommitLog offset up to which the CommitLog was fsynced        |
| 16     | 8    | dispatched offset: ConsumeQueue and index entries of every    |
|        |      | record below it were fsynced (never above the first field)    |
| 24     | 8    | time the checkpoint was written (ms since the epoch)          |
| 32     | 4    | CRC32 of bytes 0..31                                          |

`abort` exists while a store is open; finding it at start means the last run
did not shut down. `lock` is held with ``flock`` while a process has the store
open, so two processes never write the same files.
"""

from __future__ import annotations

import fcntl
import os
import struct
import zlib
from dataclasses import dataclass

from skiff.common.errors import ConfigError
from skiff.common.files import replace_atomically

CHECKPOINT = struct.Struct(">IIqqq")
CRC = struct.Struct(">I")
assert CHECKPOINT.size + CRC.size == 36
MAGIC = 0x534B4350
VERSION = 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    commitlog_flushed_offset: int
    dispatched_offset: int
    written_ms: int

    def encode(self) -> bytes:
        body = CHECKPOINT.pack(MAGIC, VERSION, self.commitlog_flushed_offset, self.dispatched_offset, self.written_ms)
        return body + CRC.pack(zlib.crc32(body))

    @classmethod
    def decode(cls, raw: bytes) -> Checkpoint | None:
        """The checkpoint in ``raw``, or None when it is torn, foreign or damaged."""
        if len(raw) != CHECKPOINT.size + CRC.size:
            return None
        body = raw[: CHECKPOINT.size]
        if CRC.unpack_from(raw, CHECKPOINT.size)[0] != zlib.crc32(body):
            return None
        magic, version, flushed, dispatched, written = CHECKPOINT.unpack(body)
        if magic != MAGIC or version != VERSION or not 0 <= dispatched <= flushed:
            return None
        return cls(flushed, dispatched, written)


def read_checkpoint(path: str) -> Checkpoint | None:
    try:
        with open(path, "rb") as f:
            return Checkpoint.decode(f.read(64))
    except FileNotFoundError:
        return None


def write_checkpoint(path: str, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint atomically. Raises OSError (for example on a full disk)."""
    replace_atomically(path, checkpoint.encode())


class StoreLock:
    """An exclusive ``flock`` on ``<root>/lock``; the kernel drops it when the process dies."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigError(f"storePathRootDir: {os.path.dirname(self.path)} is in use by another process") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
