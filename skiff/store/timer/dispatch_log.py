"""Dispatch logs: what became of each slot's scheduled messages (layout in `formats`).

Deliveries are written here in batches at each timer checkpoint, after the
CommitLog is fsynced past them, so a dispatch record never claims a delivery
the CommitLog could lose. Between checkpoints the CommitLog alone knows (each
delivered message carries ``TIMER_ID``), and a start reads them back from
its tail. Cancellations are written and fsynced at once.

Appends come from the delivery thread (checkpoints), admin calls (cancel) and
the start; deletion from the replay thread, which deletes a slot only when
everything in it was delivered or cancelled and no delivery of it waits for a
checkpoint. One lock orders them.
"""

from __future__ import annotations

import os
import threading

from skiff.common.files import fsync_dir
from skiff.store.timer.formats import (
    DISPATCH_RECORD,
    Outcome,
    decode_dispatch,
    encode_dispatch,
    read_small_file,
    slot_file_name,
    slot_files,
    write_all,
)


class DispatchLogs:
    """The ``dispatch/`` directory: one append-only log per slot."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()

    def open(self) -> list[str]:
        """Count each log's records and cut torn tails; return notes on what was cut."""
        os.makedirs(self.directory, exist_ok=True)
        notes = []
        for slot, path in slot_files(self.directory).items():
            raw = read_small_file(path) or b""
            valid = decode_dispatch(raw)[1]
            if valid < len(raw):
                os.truncate(path, valid)
                notes.append(f"cut a torn tail of {len(raw) - valid} bytes from dispatch log {slot_file_name(slot)}")
            self._counts[slot] = valid // DISPATCH_RECORD.size
        return notes

    def _path(self, slot_ms: int) -> str:
        return os.path.join(self.directory, slot_file_name(slot_ms))

    def read(self, slot_ms: int) -> dict[int, Outcome]:
        """Outcome by timer id of everything the slot's log records."""
        with self._lock:
            raw = read_small_file(self._path(slot_ms)) or b""
        return decode_dispatch(raw)[0]

    def append(self, slot_ms: int, kind: Outcome, timer_ids: list[int]) -> None:
        """Append and fsync. Raises OSError."""
        if not timer_ids:
            return
        with self._lock:
            new = slot_ms not in self._counts
            fd = os.open(self._path(slot_ms), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                write_all(fd, encode_dispatch(kind, timer_ids))
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                fsync_dir(self.directory)
            self._counts[slot_ms] = self._counts.get(slot_ms, 0) + len(timer_ids)

    def count(self, slot_ms: int) -> int:
        return self._counts.get(slot_ms, 0)

    def slots(self) -> set[int]:
        with self._lock:
            return set(self._counts)

    def delete(self, slot_ms: int) -> None:
        with self._lock:
            self._counts.pop(slot_ms, None)
            try:
                os.unlink(self._path(slot_ms))
            except FileNotFoundError:
                pass
