"""The CommitLog: every message of every topic, appended to one sequence of files.

Files are `mappedFileSizeCommitLog` bytes, named by their 20-digit start offset
(`commitlog/00000000000000000000`, `commitlog/00000000001073741824`, ...), and
hold records in RocketMQ's stored-message format (`skiff.common.record`), back
to back. A record never spans two files: when the next record (or batch) does
not fit, the rest of the file is covered by one blank record and writing moves
on to the next file. A record may fill its file exactly; otherwise at least the
8 bytes of a blank record stay free.

Blank (end-of-file) record:

| offset | size | field                                   |
|--------|------|-----------------------------------------|
| 0      | 4    | TOTALSIZE: the bytes left in the file   |
| 4      | 4    | MAGICCODE 0xCBD43194 (BLANK_MAGIC)      |
| 8      | ...  | zeros up to the end of the file         |

Bytes after the last record of the last file are zeros; a record header of
zeros therefore marks the end of the written data.

Appends happen under the store's put lock; reads take no lock (a record is laid
down completely before ``write_pos`` moves past it).
"""

from __future__ import annotations

import enum
import itertools
import mmap
import struct
import threading
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from skiff.common.errors import DecodeError
from skiff.common.record import (
    BLANK_HEAD,
    BLANK_MAGIC,
    FIXED_BYTES_V4,
    MAGIC_V1,
    RecordRow,
    body_crc,
    pack_records,
    read_head,
    read_tail,
)
from skiff.store.mapped_file import MappedFile, MappedFileQueue
from skiff.store.pages import PAGE_BYTES

BLANK_MIN_BYTES = BLANK_HEAD.size
assert BLANK_MIN_BYTES == 8
DROP_CHUNK_BYTES = 4 << 20
"""Flushed bytes are dropped from the page cache in whole chunks of this size (`CommitLog.flush`)."""


class Slot(enum.Enum):
    """What a position in the CommitLog holds."""

    RECORD = 0
    BLANK = 1
    END = 2
    INVALID = 3


class Inspection(NamedTuple):
    kind: Slot
    size: int
    reason: str = ""


def inspect_record(buf: bytes | bytearray | memoryview | mmap.mmap, pos: int, phys: int, room: int) -> Inspection:
    """Validate what starts at ``buf[pos]`` (CommitLog offset ``phys``, ``room`` bytes to the
    end of its file or buffer): magic, size, structure, stored offset and body CRC."""
    if room < BLANK_MIN_BYTES:
        return Inspection(Slot.INVALID, 0, f"{room} bytes left at offset {phys}, too few for a record")
    total, magic = BLANK_HEAD.unpack_from(buf, pos)
    if total == 0 and magic == 0:
        return Inspection(Slot.END, 0)
    if magic == BLANK_MAGIC:
        if total != room:
            return Inspection(Slot.INVALID, 0, f"blank record at offset {phys} is {total} bytes, not the {room} left")
        return Inspection(Slot.BLANK, total)
    if magic != MAGIC_V1:
        return Inspection(Slot.INVALID, 0, f"bad magic {magic & 0xFFFFFFFF:#010x} at offset {phys}")
    if not FIXED_BYTES_V4 < total <= room:
        return Inspection(Slot.INVALID, 0, f"record size {total} at offset {phys} does not fit in {room} bytes")
    try:
        head = read_head(buf, pos)
        tail = read_tail(buf, pos, head)
    except DecodeError as exc:
        return Inspection(Slot.INVALID, 0, f"malformed record at offset {phys}: {exc}")
    if head.physical_offset != phys or head.queue_id < 0 or not tail.topic:
        return Inspection(Slot.INVALID, 0, f"record at offset {phys} names offset {head.physical_offset}")
    if body_crc(buf[tail.body_pos : tail.body_pos + tail.body_length]) != head.body_crc:
        return Inspection(Slot.INVALID, 0, f"bad body CRC in the record at offset {phys}")
    return Inspection(Slot.RECORD, total)


class CommitLog:
    """Appends and reads records; see the module docstring for the file layout."""

    def __init__(self, directory: str, file_size: int, store_host: bytes, cache_bytes: int = 0) -> None:
        """``cache_bytes``: flushed bytes kept in the page cache behind the flushed offset
        (commitLogPageCacheBytes; 0 keeps everything)."""
        self.files = MappedFileQueue(directory, file_size, reserve_on_create=file_size,
                                     size_key="mappedFileSizeCommitLog")
        self.file_size = file_size
        self.store_host = store_host
        self.write_pos = 0
        """CommitLog offset where the next record goes (the max physical offset)."""
        self.flushed = 0
        self.fsync_count = 0
        self._flush_lock = threading.Lock()
        self.packed = bytearray()
        """Where an append's records are laid down before their one write (reused: it grows
        to the largest batch)."""
        self.cache_bytes = cache_bytes
        self._dropped = 0
        """CommitLog offset below which flushed pages were dropped from the page cache."""

    # -- loading and recovery -------------------------------------------------

    def load(self) -> list[str]:
        notes = self.files.load()
        self.write_pos = self.flushed = self.min_offset
        return notes

    @property
    def min_offset(self) -> int:
        first = self.files.min_offset
        return 0 if first is None else first

    @property
    def files_end(self) -> int:
        last = self.files.last()
        return 0 if last is None else last.end

    def scan_valid(self, start: int) -> tuple[int, str]:
        """Walk validated records from ``start``; return where valid data ends and why."""
        pos = start
        while True:
            f = self.files.find(pos)
            if f is None:
                return pos, ""
            rel = pos - f.start
            found = inspect_record(f.mm, rel, pos, f.size - rel)
            if found.kind is Slot.END:
                return pos, ""
            if found.kind is Slot.INVALID:
                return pos, found.reason
            pos += found.size

    def truncate(self, end: int) -> tuple[int, int]:
        """Make ``end`` the end of the data: zero what follows it and delete the files that
        start at or after it. Return (non-zero bytes removed, files deleted)."""
        dirty = sum(f.zero_from(max(0, end - f.start)) for f in self.files.files if f.end > end)
        removed = self.files.remove_from(end)
        self.write_pos = self.flushed = end
        return dirty, removed

    def release(self, start: int, end: int) -> None:
        """Drop the process's mappings of the files holding [start, end) (`MappedFile.release`):
        recovery reads them once, and a rebuild from the first record would otherwise keep
        every CommitLog page it validated in the broker's RSS."""
        for f in self.files.files:
            if f.end > start and f.start < end:
                f.release()

    def iter_records(self, start: int, end: int) -> Iterator[tuple[int, memoryview]]:
        """(offset, file mapping) of each record in [start, end), blanks skipped; the data
        must have been validated, and ``start`` must be a record's start. Raises
        `DecodeError` where the bytes read as no record or blank (a ``start`` inside a
        record), rather than walking them (a zero length there looped for ever)."""
        pos = start
        while pos < end:
            f = self.files.find(pos)
            if f is None:
                return
            rel = pos - f.start
            total, magic = BLANK_HEAD.unpack_from(f.mm, rel)
            if total <= 0 or rel + total > f.size or (magic != MAGIC_V1 and magic != BLANK_MAGIC):
                raise DecodeError(f"no CommitLog record starts at {pos} (length {total}, magic {magic:#x}): "
                                  f"the walk from {start} did not begin at a record")
            if magic == MAGIC_V1:
                yield pos, memoryview(f.mm)[rel : rel + total]
            pos += total

    # -- appending ------------------------------------------------------------

    def append(
        self,
        msgs: Sequence[RecordRow],
        topic_raw: bytes,
        queue_offsets: Sequence[int],
        sizes: list[int],
        total: int,
        store_timestamp: int,
    ) -> list[int]:
        """Write the records of ``msgs`` (checked) back to back in one file, as one write
        (`MappedFile.write`); return their offsets. ``total`` must not exceed the file size.
        Raises OSError when a new file cannot be created or reserved, or the write fails
        (the disk is full)."""
        f = self.place(total)
        rel = self.write_pos - f.start
        offsets = list(itertools.accumulate(sizes[:-1], initial=self.write_pos)) if len(sizes) > 1 else [self.write_pos]
        if len(self.packed) < total:
            self.packed = bytearray(total)
        pack_records(msgs, topic_raw, queue_offsets, offsets, sizes, store_timestamp, self.store_host, None,
                     self.packed, 0)
        f.write(rel, memoryview(self.packed)[:total])
        self.write_pos += total
        return offsets

    def place(self, total: int) -> MappedFile:
        """The file the next ``total`` bytes of records go to, at ``write_pos``, with their
        blocks reserved: the last file when it has room (a run fits exactly or leaves room
        for an end-of-file blank), else the next one after a blank (`_roll`). Raises OSError
        when a file cannot be created or reserved. Asking twice gives the same file."""
        # the last file holds the write position unless a file must be made (no `find` call
        # on every append: a lone send's append is the path this keeps short)
        files = self.files.files
        pos = self.write_pos
        f = files[-1] if files else None
        if f is None or not f.start <= pos < f.start + f.size:
            f = self.files.find(pos) or self.files.get_or_create(pos)
        room = f.start + f.size - pos
        if not (total == room or total + BLANK_MIN_BYTES <= room):
            f = self._roll(f, room)
        rel = self.write_pos - f.start
        if rel + total > f.reserved:  # `ensure_reserved`'s own test, without its call on every append
            f.ensure_reserved(rel + total, f.size)
        return f

    def _roll(self, f: MappedFile, room: int) -> MappedFile:
        """End ``f`` with a blank record over its last ``room`` bytes (too few for the next
        records) and return the next file."""
        rel = self.write_pos - f.start
        f.ensure_reserved(f.size, f.size)
        f.write(rel, memoryview(BLANK_HEAD.pack(room, BLANK_MAGIC)))
        self.write_pos = f.end
        return self.files.get_or_create(self.write_pos)

    def append_raw(self, data: memoryview) -> None:
        """Write already-validated bytes at ``write_pos``, file by file, as appends are
        written (`MappedFile.write`). Raises OSError."""
        done = 0
        while done < len(data):
            f = self.files.get_or_create(self.write_pos)
            rel = self.write_pos - f.start
            n = min(len(data) - done, f.size - rel)
            f.ensure_reserved(f.size, f.size)
            f.write(rel, data[done : done + n])
            done += n
            self.write_pos += n

    # -- reading --------------------------------------------------------------

    def record_view(self, phys: int) -> memoryview | None:
        """A zero-copy slice of the record that starts at ``phys``, or None."""
        if not self.min_offset <= phys < self.write_pos:
            return None
        f = self.files.find(phys)
        if f is None:
            return None
        rel = phys - f.start
        try:
            total, magic = BLANK_HEAD.unpack_from(f.mm, rel)
            if magic != MAGIC_V1 or total <= 0 or phys + total > min(self.write_pos, f.end):
                return None
            return f.view(rel, total)
        except (ValueError, struct.error):
            return None  # the file was closed by retention meanwhile

    def views(self, start: int, end: int) -> list[memoryview]:
        """Zero-copy slices covering [start, end), one per file touched."""
        out = []
        while start < end:
            f = self.files.find(start)
            if f is None:
                raise ValueError(f"no CommitLog file holds offset {start}")
            stop = min(end, f.end)
            out.append(f.view(start - f.start, stop - start))
            start = stop
        return out

    def store_timestamp(self, phys: int) -> int | None:
        view = self.record_view(phys)
        if view is None:
            return None
        return read_head(view).store_timestamp

    def first_store_timestamp(self, f: MappedFile) -> int | None:
        """Store time of the first record in ``f`` (None when it has none yet)."""
        if f.start >= self.write_pos:
            return None
        return self.store_timestamp(f.start)

    # -- flushing -------------------------------------------------------------

    def flush(self, keep_tail: bool = False) -> int:
        """fdatasync what was written since the last flush; return the new flushed offset.

        ``keep_tail`` leaves the last, partly written page for the next flush when whole
        pages are due anyway (ASYNC_FLUSH's periodic flush while appends stream in): the
        appending thread keeps writing into that page, and a write into a page the
        kernel is writing back waits for it while holding the GIL. When appends have
        slowed to less than a page per flush, everything is flushed."""
        with self._flush_lock:
            target = self.write_pos
            whole_pages = target - target % PAGE_BYTES
            if keep_tail and whole_pages > self.flushed:
                target = whole_pages
            if target > self.flushed:
                self.fsync_count += self.files.sync_range(self.flushed, target)
                self.flushed = target
                self._drop_behind()
            return self.flushed

    def _drop_behind(self) -> None:
        """Drop the flushed pages more than ``cache_bytes`` behind the flushed offset from the
        mapping and the page cache (docs/store.md, "Dropping behind"): the pages the
        writer's next appends need are then the ones just freed, which cost a fraction of
        pages the machine has not used lately, and the broker's footprint stays at the
        window. A reader of older data faults it back in from the file."""
        if not self.cache_bytes:
            return
        hi = self.flushed - self.cache_bytes
        hi -= hi % DROP_CHUNK_BYTES
        lo = max(self._dropped, self.min_offset)
        if hi <= lo:
            return
        for f in self.files.files:
            if f.end > lo and f.start < hi:
                f.drop(max(lo, f.start) - f.start, min(hi, f.end) - f.start)
        self._dropped = hi

    def flush_through(self, offset: int) -> int:
        """fdatasync at least up to ``offset`` (a record boundary the checkpoint will name,
        even inside the page `flush` left for later); return the flushed offset."""
        with self._flush_lock:
            if offset > self.flushed:
                self.fsync_count += self.files.sync_range(self.flushed, offset)
                self.flushed = offset
            return self.flushed

    def close(self) -> None:
        self.files.close()

