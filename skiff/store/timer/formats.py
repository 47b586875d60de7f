"""The timer's files, byte by byte (all big-endian).

Under ``<storePathRootDir>/timer/``:

| path | what |
|---|---|
| ``schedule/<20-digit slot start ms>`` | schedule log: the parked messages due in one slot |
| ``dispatch/<20-digit slot start ms>`` | dispatch log: what became of the slot's messages |
| ``progress`` | how far the schedule logs are committed (replaced atomically) |
| ``checkpoint`` | CommitLog offset below which every delivery is in a durable dispatch log |

A **timer id** is the CommitLog offset of the parked record in
SCHEDULE_TOPIC_XXXX: unique in a store, and the same every time the record is
replayed, so it makes replays and deliveries idempotent.

Schedule log record (``SCHEDULE_HEAD``, then the message):

| offset | size | field |
|---|---|---|
| 0 | 4 | total size of this record, head included (int32) |
| 4 | 4 | magic 0x534B544D ("SKTM") |
| 8 | 8 | due time, ms since the epoch |
| 16 | 8 | timer id |
| 24 | n | the parked record, byte for byte as the CommitLog holds it |

Dispatch log record (``DISPATCH_RECORD``, 16 bytes, appended only):

| offset | size | field |
|---|---|---|
| 0 | 4 | magic 0x534B5444 ("SKTD") |
| 4 | 4 | kind: 1 delivered, 2 cancelled, 3 dropped (the store refused it for good) |
| 8 | 8 | timer id |

Progress file (``PROGRESS_HEAD``, entries, ``CRC``):

| offset | size | field |
|---|---|---|
| 0 | 4 | magic 0x534B5452 ("SKTR") |
| 4 | 4 | version 1 |
| 8 | 8 | time written, ms |
| 16 | 4 | q: SCHEDULE_TOPIC_XXXX queues |
| 20 | 4 | s: schedule logs |
| 24 | 12·q | per queue (``PROGRESS_QUEUE``): queue id int32, next consume-queue offset to replay int64 |
| | 24·s | per log (``PROGRESS_SLOT``): slot start ms, committed bytes, committed records (int64 each) |
| | 4 | CRC32 of everything before |

Checkpoint file (``CHECKPOINT``, 28 bytes):

| offset | size | field |
|---|---|---|
| 0 | 4 | magic 0x534B5443 ("SKTC") |
| 4 | 4 | version 1 |
| 8 | 8 | CommitLog offset: every delivery stored below it is in a fsynced dispatch log |
| 16 | 8 | time written, ms |
| 24 | 4 | CRC32 of bytes 0..23 |

Both small files are written to ``<name>.tmp``, fsynced and renamed over the
old one, so a crash leaves the old or the new file, never a mix.
"""

from __future__ import annotations

import enum
import os
import struct
import zlib
from typing import NamedTuple

from skiff.common.errors import CorruptionError

SCHEDULE_HEAD = struct.Struct(">iIqq")
assert SCHEDULE_HEAD.size == 24
SCHEDULE_MAGIC = 0x534B544D

DISPATCH_RECORD = struct.Struct(">Iiq")
assert DISPATCH_RECORD.size == 16
DISPATCH_MAGIC = 0x534B5444

PROGRESS_HEAD = struct.Struct(">IIqii")
PROGRESS_QUEUE = struct.Struct(">iq")
PROGRESS_SLOT = struct.Struct(">qqq")
assert (PROGRESS_HEAD.size, PROGRESS_QUEUE.size, PROGRESS_SLOT.size) == (24, 12, 24)
PROGRESS_MAGIC = 0x534B5452

CHECKPOINT = struct.Struct(">IIqq")
CRC = struct.Struct(">I")
assert CHECKPOINT.size + CRC.size == 28
CHECKPOINT_MAGIC = 0x534B5443
VERSION = 1


class Outcome(enum.IntEnum):
    """What a dispatch log record says became of a scheduled message."""

    DELIVERED = 1
    CANCELLED = 2
    DROPPED = 3


class SlotLength(NamedTuple):
    """What of one schedule log is committed."""

    size_bytes: int
    records: int


class Progress(NamedTuple):
    """The replay's committed state: where each queue resumes, and each log's committed part."""

    queues: dict[int, int]
    slots: dict[int, SlotLength]


def encode_progress(progress: Progress, written_ms: int) -> bytes:
    parts = [PROGRESS_HEAD.pack(PROGRESS_MAGIC, VERSION, written_ms, len(progress.queues), len(progress.slots))]
    parts += [PROGRESS_QUEUE.pack(q, offset) for q, offset in sorted(progress.queues.items())]
    parts += [PROGRESS_SLOT.pack(s, n.size_bytes, n.records) for s, n in sorted(progress.slots.items())]
    body = b"".join(parts)
    return body + CRC.pack(zlib.crc32(body))


def decode_progress(raw: bytes, path: str) -> Progress:
    """The progress in ``raw``; `CorruptionError` when it is torn or damaged (it is replaced
    atomically, so that is a disk fault, and guessing could deliver twice or lose messages)."""
    if len(raw) < PROGRESS_HEAD.size + CRC.size or CRC.unpack_from(raw, len(raw) - CRC.size)[0] != zlib.crc32(raw[:-CRC.size]):
        raise CorruptionError(f"timer progress file {path} is damaged (bad size or CRC)")
    magic, version, _, queues, slots = PROGRESS_HEAD.unpack_from(raw)
    expected = PROGRESS_HEAD.size + queues * PROGRESS_QUEUE.size + slots * PROGRESS_SLOT.size + CRC.size
    if magic != PROGRESS_MAGIC or version != VERSION or len(raw) != expected:
        raise CorruptionError(f"timer progress file {path} is not a version {VERSION} progress file")
    pos = PROGRESS_HEAD.size
    queue_map = {}
    for q, offset in PROGRESS_QUEUE.iter_unpack(raw[pos : pos + queues * PROGRESS_QUEUE.size]):
        queue_map[q] = offset
    pos += queues * PROGRESS_QUEUE.size
    slot_map = {s: SlotLength(size, n) for s, size, n in PROGRESS_SLOT.iter_unpack(raw[pos : pos + slots * PROGRESS_SLOT.size])}
    return Progress(queue_map, slot_map)


def encode_checkpoint(commitlog_offset: int, written_ms: int) -> bytes:
    body = CHECKPOINT.pack(CHECKPOINT_MAGIC, VERSION, commitlog_offset, written_ms)
    return body + CRC.pack(zlib.crc32(body))


def decode_checkpoint(raw: bytes, path: str) -> int:
    """The CommitLog offset of the checkpoint in ``raw``; `CorruptionError` when damaged."""
    if len(raw) != CHECKPOINT.size + CRC.size or CRC.unpack_from(raw, CHECKPOINT.size)[0] != zlib.crc32(raw[: CHECKPOINT.size]):
        raise CorruptionError(f"timer checkpoint file {path} is damaged (bad size or CRC)")
    offset: int
    magic, version, offset, _ = CHECKPOINT.unpack_from(raw)
    if magic != CHECKPOINT_MAGIC or version != VERSION or offset < 0:
        raise CorruptionError(f"timer checkpoint file {path} is not a version {VERSION} checkpoint")
    return offset


def encode_dispatch(kind: Outcome, timer_ids: list[int]) -> bytes:
    pack = DISPATCH_RECORD.pack
    return b"".join([pack(DISPATCH_MAGIC, kind, timer_id) for timer_id in timer_ids])


def decode_dispatch(raw: bytes) -> tuple[dict[int, Outcome], int]:
    """Outcomes by timer id, and the bytes of whole valid records (a torn tail ends them)."""
    out: dict[int, Outcome] = {}
    valid = len(raw) - len(raw) % DISPATCH_RECORD.size
    for i, (magic, kind, timer_id) in enumerate(DISPATCH_RECORD.iter_unpack(raw[:valid])):
        if magic != DISPATCH_MAGIC or kind not in Outcome._value2member_map_:
            return out, i * DISPATCH_RECORD.size
        out[timer_id] = Outcome(kind)
    return out, valid


def read_small_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a regular file may take less at once)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def slot_file_name(slot_ms: int) -> str:
    return f"{slot_ms:020d}"


def slot_files(directory: str) -> dict[int, str]:
    """Slot start → path of the files named like `slot_file_name` in ``directory``."""
    out = {}
    for name in os.listdir(directory):
        if len(name) == 20 and name.isdigit():
            out[int(name)] = os.path.join(directory, name)
    return out

