"""Schedule logs: the parked messages of one time slot each, on disk (layout in `formats`).

The replay thread is the only writer: it appends, and at each commit fsyncs the
logs it wrote and records their lengths in the progress file. A start truncates
each log to its committed length, so records appended after the last commit (a
crash) are written again by the replay, once. The delivery thread reads
records by position with ``pread``.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading

import numpy as np

from skiff.common.errors import CorruptionError
from skiff.common.files import fsync_dir
from skiff.store.timer.formats import (
    SCHEDULE_HEAD,
    SCHEDULE_MAGIC,
    SlotLength,
    slot_file_name,
    slot_files,
    write_all,
)

log = logging.getLogger(__name__)

ROW_FIELDS = 5
"""A wheel row: due ms, timer id, slot start ms, position in the log, record size (int64 each)."""
DUE, TIMER_ID, SLOT, POS, SIZE = range(ROW_FIELDS)


class ScheduleLog:
    """One slot's log; ``size_bytes`` and ``records`` count everything appended so far."""

    def __init__(self, path: str, slot_ms: int, size_bytes: int = 0, records: int = 0) -> None:
        self.path = path
        self.slot_ms = slot_ms
        self.size_bytes = size_bytes
        self.records = records
        self.dirty = False
        self._fd: int | None = None
        self._lock = threading.Lock()

    def _file(self) -> int:
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            return self._fd

    def append(self, blob: bytes, records: int) -> int:
        """Append whole records; return the position of the first. Raises OSError, after
        which nothing of ``blob`` is left in the file."""
        pos = self.size_bytes
        self.dirty = True
        try:
            write_all(self._file(), blob)
        except OSError:
            os.ftruncate(self._file(), pos)
            raise
        self.size_bytes += len(blob)
        self.records += records
        return pos

    def cut(self, length: SlotLength) -> None:
        """Go back to ``length`` (a batch whose other appends failed is undone)."""
        os.ftruncate(self._file(), length.size_bytes)
        self.size_bytes, self.records = length

    def read(self, pos: int, size: int) -> bytes:
        data = os.pread(self._file(), size, pos)
        if len(data) != size:
            raise CorruptionError(f"schedule log {self.path}: record at {pos} is cut short")
        return data

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self._file())
            self.dirty = False

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def committed(self) -> SlotLength:
        return SlotLength(self.size_bytes, self.records)

    def rows(self) -> tuple[np.ndarray, str]:
        """Every record as a wheel row (an (n, 5) int64 array), and why reading stopped early
        ("" when it did not): a damaged record ends what can be trusted."""
        if self.size_bytes == 0:
            return np.empty((0, ROW_FIELDS), dtype=np.int64), ""
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), self.size_bytes, access=mmap.ACCESS_READ) as mm:
            return _scan(mm, self.size_bytes, self.slot_ms, self.path)

    def matching(self, needle: bytes, timer_id: int | None) -> list[bytes]:
        """The parked records (without their schedule head) that contain ``needle`` or have
        ``timer_id``: a search of the whole file, for cancels of records retention removed."""
        if self.size_bytes == 0:
            return []
        rows, _ = self.rows()
        starts, ends = rows[:, POS], rows[:, POS] + rows[:, SIZE]
        picked = set() if timer_id is None else set(np.flatnonzero(rows[:, TIMER_ID] == timer_id).tolist())
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), self.size_bytes, access=mmap.ACCESS_READ) as mm:
            at = mm.find(needle)
            while at >= 0:
                i = int(np.searchsorted(starts, at, side="right")) - 1
                if i >= 0 and at < ends[i]:
                    picked.add(i)
                at = mm.find(needle, max(at + 1, int(ends[i]) if i >= 0 else 0))
            return [mm[int(starts[i]) + SCHEDULE_HEAD.size : int(ends[i])] for i in sorted(picked)]


def _scan(buf: mmap.mmap, end: int, slot_ms: int, path: str) -> tuple[np.ndarray, str]:
    unpack = SCHEDULE_HEAD.unpack_from
    head = SCHEDULE_HEAD.size
    out: list[tuple[int, int, int, int, int]] = []
    pos = 0
    while pos < end:
        if pos + head > end:
            return _array(out), f"schedule log {path}: a record head at {pos} is cut short"
        size, magic, due, timer_id = unpack(buf, pos)
        if magic != SCHEDULE_MAGIC or size <= head or pos + size > end:
            return _array(out), f"schedule log {path}: damaged record at {pos}"
        out.append((due, timer_id, slot_ms, pos, size))
        pos += size
    return _array(out), ""


def _array(rows: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, ROW_FIELDS)


class ScheduleLogs:
    """The ``schedule/`` directory: one `ScheduleLog` per slot that has messages."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.logs: dict[int, ScheduleLog] = {}
        self._retired: dict[int, ScheduleLog] = {}

    def open(self, committed: dict[int, SlotLength]) -> list[str]:
        """Bring the files back to their committed lengths; return notes on what was repaired.
        A file shorter than committed lost fsynced data: `CorruptionError`."""
        os.makedirs(self.directory, exist_ok=True)
        notes = []
        on_disk = slot_files(self.directory)
        for slot, path in sorted(on_disk.items()):
            length = committed.get(slot)
            if length is None:
                os.unlink(path)
                notes.append(f"removed the uncommitted schedule log {slot_file_name(slot)}")
                continue
            actual = os.path.getsize(path)
            if actual < length.size_bytes:
                raise CorruptionError(f"schedule log {path} has {actual} bytes, fewer than the "
                                      f"{length.size_bytes} committed")
            if actual > length.size_bytes:
                os.truncate(path, length.size_bytes)
                notes.append(f"cut {actual - length.size_bytes} uncommitted bytes from schedule log {slot_file_name(slot)}")
            self.logs[slot] = ScheduleLog(path, slot, length.size_bytes, length.records)
        for slot in committed.keys() - on_disk.keys():
            log.error("schedule log %s is missing; its %d messages are lost", slot_file_name(slot), committed[slot].records)
            notes.append(f"schedule log {slot_file_name(slot)} is missing ({committed[slot].records} messages lost)")
        return notes

    def get_or_create(self, slot_ms: int) -> ScheduleLog:
        """The slot's log; a retired one comes back as it was (a late message for its slot)."""
        found = self.logs.get(slot_ms)
        if found is None:
            found = self._retired.pop(slot_ms, None) or ScheduleLog(
                os.path.join(self.directory, slot_file_name(slot_ms)), slot_ms)
            self.logs[slot_ms] = found
        return found

    def committed(self) -> dict[int, SlotLength]:
        return {slot: f.committed() for slot, f in self.logs.items() if f.records}

    def sync(self) -> None:
        """fsync every log written since the last call, then the directory (new files' names)."""
        dirty = [f for f in self.logs.values() if f.dirty]
        for f in dirty:
            f.sync()
        if dirty:
            fsync_dir(self.directory)

    def close_except(self, keep: set[int]) -> None:
        """Close the files of slots not in ``keep``, so far-future slots hold no descriptor."""
        for slot, f in self.logs.items():
            if slot not in keep:
                f.close()

    def retire(self, slot_ms: int) -> None:
        """Take a finished slot's log out of use; its file stays until `unlink`."""
        f = self.logs.pop(slot_ms, None)
        if f is not None:
            f.close()
            self._retired[slot_ms] = f

    def unlink(self, slot_ms: int) -> None:
        f = self._retired.pop(slot_ms, None)
        if f is not None:
            try:
                os.unlink(f.path)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        for f in self.logs.values():
            f.close()
