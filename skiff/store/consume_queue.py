"""ConsumeQueues: per topic and queue id, the index of that queue's records in the CommitLog.

Files are `consumequeue/<topic>/<queueId>/<20-digit start>`, where the start is
the byte position of the file's first entry (entry n lives at byte 20·n, so the
lookup of entry n is O(1)); each file is `mappedFileSizeConsumeQueue` bytes.
Entry layout (big-endian, ``ENTRY``):

| offset | size | field                                             |
|--------|------|---------------------------------------------------|
| 0      | 8    | CommitLog offset of the record (int64)            |
| 8      | 4    | record size in bytes (int32)                      |
| 12     | 8    | tag code, `skiff.common.hashing.tag_hash` (int64) |

A size of 0 marks an entry that was never written. Files are sparse and reserve
blocks ahead of the write position (see `skiff.store.mapped_file`), so a full
disk shows up as an OSError before the CommitLog write, never as SIGBUS. Reads
view many entries at once as a numpy array over the mapping.
"""

from __future__ import annotations

import mmap
import os
import resource
import shutil
import struct
import threading
from collections.abc import Sequence

import numpy as np

from skiff.common import kernels
from skiff.common.errors import CorruptionError
from skiff.store.config import CQ_ENTRY_BYTES
from skiff.store.mapped_file import MappedFile, MappedFileQueue, file_name

ENTRY = struct.Struct(">qiq")
assert ENTRY.size == CQ_ENTRY_BYTES
ENTRY_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tag", ">i8")])
assert ENTRY_DTYPE.itemsize == CQ_ENTRY_BYTES

Entry = tuple[int, int, int]
"""(CommitLog offset, size, tag code)."""

SYNCFS_MIN_QUEUES = 64
"""ConsumeQueues with new entries from which one flush syncs the file system once
instead of each queue's file. An fsync costs 30-60 µs of CPU and a journal commit
whatever it writes; with traffic spread over 16,384 queues (a few entries each per
second) the periodic flush made 16k of them a second, the largest per-queue cost of
the broker. syncfs writes the same pages (and whatever else is dirty on that file
system, which the CommitLog's own flush would write soon anyway) in one call."""

PREPARED_RESERVE_BYTES = mmap.PAGESIZE
"""Blocks a queue's first file reserves when its topic is created: its first page (204
entries), so the first messages need no reservation, and 16,384 idle queues hold 64 MiB
of disk, not the 16 GiB a full `RESERVE_CHUNK_BYTES` each would."""

FD_HEADROOM = 1024
"""Descriptors a store leaves to sockets, CommitLog and index files when it maps new
queues' files ahead of their first message (`mapping_budget`)."""


def _entries_of(f: MappedFile, lo: int, hi: int) -> np.ndarray:
    """Entries with logical offsets [lo, hi) of file ``f``, as a view over its mapping."""
    return np.frombuffer(f.mm, ENTRY_DTYPE, hi - lo, lo * CQ_ENTRY_BYTES - f.start)


_SCAN_BYTES = 3276 * CQ_ENTRY_BYTES


def _written_span(f: MappedFile) -> tuple[int, int] | None:
    """[first, end) entry numbers within ``f`` that hold written entries, or None.

    Entries are written back to back, so the first and last entries of non-zero
    size bound them; only the file system's data extent is read."""
    extent = f.data_extent()
    if extent is None:
        return None
    lo = extent[0] - extent[0] % CQ_ENTRY_BYTES
    hi = extent[1] - extent[1] % CQ_ENTRY_BYTES
    first = None
    for pos in range(lo, hi, _SCAN_BYTES):
        found = _written_in(f, pos, min(hi, pos + _SCAN_BYTES))
        if len(found):
            first = pos // CQ_ENTRY_BYTES + int(found[0])
            break
    if first is None:
        return None
    end = hi
    while end > first * CQ_ENTRY_BYTES:
        pos = max(first * CQ_ENTRY_BYTES, end - _SCAN_BYTES)
        found = _written_in(f, pos, end)
        if len(found):
            return first, pos // CQ_ENTRY_BYTES + int(found[-1]) + 1
        end = pos
    return None


def _written_in(f: MappedFile, lo: int, hi: int) -> np.ndarray:
    """Indexes (from ``lo``) of the entries of non-zero size in file bytes [lo, hi)."""
    return np.flatnonzero(np.frombuffer(f.pread(lo, hi - lo), ENTRY_DTYPE)["size"])


class ConsumeQueue:
    """One queue's entries; logical offsets [min_offset, max_offset) are readable."""

    def __init__(self, directory: str, topic: str, queue_id: int, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(directory, file_size, reserve_on_create=0,
                                     size_key="mappedFileSizeConsumeQueue", random_access=True,
                                     hold_fd=False)
        self.per_file = file_size // CQ_ENTRY_BYTES
        self.min_offset = 0
        self.max_offset = 0
        self._flushed_to = 0
        self.room_end = 0
        """Byte position up to which files exist and are reserved (a cache for `ensure_room`)."""

    # -- loading ----------------------------------------------------------------

    def load(self) -> list[str]:
        """Find the written entries of the files on disk (with `pread`: see mapped_file)."""
        notes = self.files.load()
        files = self.files.files
        if len(files) == 1 and files[0].start == 0 and not files[0].holds_data():
            self.files.close()  # made by `ConsumeQueueTable.prepare`, never written: hold nothing
            return notes
        if not files:
            return notes
        self.min_offset = self.max_offset = files[0].start // CQ_ENTRY_BYTES
        for f in files:
            span = _written_span(f)
            if span is not None:
                self.min_offset = f.start // CQ_ENTRY_BYTES + span[0]
                break
        for f in reversed(files):
            span = _written_span(f)
            if span is not None:
                self.max_offset = f.start // CQ_ENTRY_BYTES + span[1]
                f.reserved = span[1] * CQ_ENTRY_BYTES
                break
        self._flushed_to = self.max_offset
        return notes

    def _span(self, f: MappedFile) -> tuple[int, int]:
        lo = f.start // CQ_ENTRY_BYTES
        return lo, lo + self.per_file

    def correct_min(self, min_phys: int) -> None:
        """Move ``min_offset`` to the first written entry whose record is at or above ``min_phys``."""
        offset = self.min_offset
        while offset < self.max_offset:
            f = self.files.find(offset * CQ_ENTRY_BYTES)
            if f is None:
                break
            hi = min(self._span(f)[1], self.max_offset)
            arr = _entries_of(f, offset, hi)
            good = np.flatnonzero((arr["size"] > 0) & (arr["offset"] >= min_phys))
            if len(good):
                self.min_offset = offset + int(good[0])
                return
            offset = hi
        self.min_offset = self.max_offset

    # -- writing ----------------------------------------------------------------

    def prepare_first(self) -> None:
        """Make, reserve and map the first file of this new, empty queue before its first
        message (`ConsumeQueueTable.prepare`). Raises FileExistsError, OSError."""
        f = self.files.create_first(PREPARED_RESERVE_BYTES)
        f.warm(PREPARED_RESERVE_BYTES)
        self.room_end = f.reserved

    def ensure_room(self, count: int) -> None:
        """Create and reserve what ``count`` more entries need. Raises OSError (disk full)."""
        pos = self.max_offset * CQ_ENTRY_BYTES
        end = pos + count * CQ_ENTRY_BYTES
        if end <= self.room_end:
            return
        while pos < end:
            f = self.files.get_or_create(pos)
            f.ensure_reserved(min(end, f.end) - f.start)
            self.room_end = f.start + f.reserved
            pos = f.end

    def append(self, first_offset: int, physical_offsets: Sequence[int], sizes: Sequence[int],
               tag_codes: Sequence[int]) -> None:
        """Write entries (columns) at logical offsets from ``first_offset`` on.

        `put_queue_entries` writes the part of the run each file holds.

        Entries already present (a dispatch repeated after a failure) are skipped; an
        empty queue may start at any offset; any other gap is corruption. Entries
        below the queue's first file are skipped too: compaction deleted those files
        (their offsets are read from the compacted segment) while the CommitLog still
        holds the records, which a recovery from the CommitLog's start re-dispatches.
        """
        if first_offset != self.max_offset:
            head = self.files.files[0].start // CQ_ENTRY_BYTES if self.files.files else 0
            if first_offset < head:
                below = min(len(physical_offsets), head - first_offset)
                physical_offsets, sizes, tag_codes = physical_offsets[below:], sizes[below:], tag_codes[below:]
                first_offset += below
                if not physical_offsets:
                    return
            if first_offset != self.max_offset:
                skip = self._reconcile(first_offset, physical_offsets[0] if physical_offsets else -1)
                physical_offsets, sizes, tag_codes = physical_offsets[skip:], sizes[skip:], tag_codes[skip:]
        count = len(physical_offsets)
        if not count:
            return
        pos = self.max_offset * CQ_ENTRY_BYTES
        if pos + count * CQ_ENTRY_BYTES > self.room_end:  # `ensure_room`'s own test: reserved by the append
            self.ensure_room(count)
        f = self.files.find(pos)
        assert f is not None  # ensure_room made it
        done = 0
        while done < count:  # a file at a time
            rel = pos - f.start
            stop = min(count, done + (f.size - rel) // CQ_ENTRY_BYTES)
            put_queue_entries(f.mm, rel, physical_offsets, sizes, tag_codes, done, stop)
            pos += (stop - done) * CQ_ENTRY_BYTES
            done = stop
            if done < count:
                f = self.files.find(pos)
                assert f is not None
        self.max_offset += count

    def _reconcile(self, first_offset: int, first_phys: int) -> int:
        """How many of the entries from ``first_offset`` are present already (they must
        match); an empty queue moves to ``first_offset``."""
        if first_offset > self.max_offset:
            if self.max_offset != self.min_offset:
                raise CorruptionError(
                    f"ConsumeQueue {self.topic}:{self.queue_id}: entry {first_offset} after {self.max_offset}"
                )
            self.min_offset = self.max_offset = first_offset
            return 0
        present = self.entry(first_offset)
        if present is None or present[0] != first_phys:
            raise CorruptionError(
                f"ConsumeQueue {self.topic}:{self.queue_id}: entry {first_offset} already holds {present}"
            )
        return self.max_offset - first_offset

    def truncate_phys(self, phys_end: int) -> int:
        """Remove the entries whose records start at or after ``phys_end``; return how many."""
        new_max = self.max_offset
        for f in reversed(self.files.files):
            lo, hi = self._span(f)
            lo, hi = max(lo, self.min_offset), min(hi, self.max_offset)
            if hi <= lo:
                continue
            k = int(np.searchsorted(_entries_of(f, lo, hi)["offset"].astype(np.int64), phys_end))
            new_max = lo + k
            if k:
                break
        removed = self.max_offset - new_max
        if removed:
            self._cut(new_max)
        return removed

    def _cut(self, new_max: int) -> None:
        self.room_end = 0
        pos = new_max * CQ_ENTRY_BYTES
        end = self.max_offset * CQ_ENTRY_BYTES
        self.max_offset = new_max
        self.min_offset = min(self.min_offset, new_max)
        self._flushed_to = min(self._flushed_to, new_max)
        while pos < end:
            f = self.files.find(pos)
            if f is None:
                break
            stop = min(end, f.end)
            f.mm[pos - f.start : stop - f.start] = bytes(stop - pos)
            pos = stop
        holder = self.files.find(new_max * CQ_ENTRY_BYTES)
        if holder is not None:
            self.files.remove_from(holder.end)

    # -- reading ----------------------------------------------------------------

    def read(self, offset: int, max_count: int) -> np.ndarray | None:
        """Up to ``max_count`` entries from ``offset``, within one file, as a numpy view;
        None when that file is gone."""
        f = self.files.find(offset * CQ_ENTRY_BYTES)
        if f is None:
            return None
        hi = min(offset + max_count, self.max_offset, self._span(f)[1])
        try:
            return _entries_of(f, offset, hi)
        except ValueError:
            return None  # closed by retention or topic deletion meanwhile

    def entry(self, offset: int) -> Entry | None:
        if not self.min_offset <= offset < self.max_offset:
            return None
        f = self.files.find(offset * CQ_ENTRY_BYTES)
        if f is None:
            return None
        try:
            return ENTRY.unpack_from(f.mm, offset * CQ_ENTRY_BYTES - f.start)
        except ValueError:
            return None

    # -- retention and durability -------------------------------------------------

    def delete_below_phys(self, min_phys: int) -> int:
        """Delete files whose entries all point below ``min_phys`` (never the last file);
        move ``min_offset`` forward. Return the number of files deleted."""
        files = self.files.files
        count = 0
        for f in files[:-1]:
            last_phys = ENTRY.unpack_from(f.mm, f.size - CQ_ENTRY_BYTES)[0]
            if last_phys >= min_phys:
                break
            count += 1
        if count:
            self.files.remove_head(count)
            self.min_offset = max(self.min_offset, self.files.files[0].start // CQ_ENTRY_BYTES)
        self.correct_min(min_phys)
        return count

    def delete_below_offset(self, offset: int) -> int:
        """Delete files whose entries all lie below queue offset ``offset`` (never the last
        file): a compacted queue reads those offsets from its segment. Return the count."""
        files = self.files.files
        count = 0
        for f in files[:-1]:
            if self._span(f)[1] > offset:
                break
            count += 1
        if count:
            self.files.remove_head(count)
            self.min_offset = max(self.min_offset, self.files.files[0].start // CQ_ENTRY_BYTES)
        return count

    @property
    def unflushed(self) -> bool:
        return self.max_offset > self._flushed_to

    def unflushed_pages(self, target: int) -> int:
        """Page boundaries between the flushed entries and ``target`` (RocketMQ's measure
        for ``flushConsumeQueueLeastPages``)."""
        return target * CQ_ENTRY_BYTES // mmap.PAGESIZE - self._flushed_to * CQ_ENTRY_BYTES // mmap.PAGESIZE

    def first_unflushed_record(self) -> int | None:
        """The CommitLog offset of the first entry not yet flushed (None: none)."""
        entry = self.entry(max(self._flushed_to, self.min_offset))
        return None if entry is None else entry[0]

    def flush(self) -> bool:
        """fsync entries written since the last flush; True if there were any."""
        target = self.max_offset
        if target <= self._flushed_to:
            return False
        self.files.sync_range(self._flushed_to * CQ_ENTRY_BYTES, target * CQ_ENTRY_BYTES)
        self._flushed_to = target
        return True

    def flushed_by_filesystem(self, target: int) -> None:
        """Entries below ``target`` were made durable by a sync of the whole file system."""
        self._flushed_to = max(self._flushed_to, min(target, self.max_offset))


class ConsumeQueueTable:
    """All ConsumeQueues of the store, by (topic, queue id)."""

    def __init__(self, directory: str, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.flush_count = 0

    def load(self) -> list[str]:
        notes: list[str] = []
        if not os.path.isdir(self.directory):
            return notes
        for topic in sorted(os.listdir(self.directory)):
            topic_dir = os.path.join(self.directory, topic)
            for qid in sorted(os.listdir(topic_dir)) if os.path.isdir(topic_dir) else ():
                if qid.isdigit():
                    cq = self._new(topic, int(qid))
                    notes += cq.load()
                    self.queues[(topic, int(qid))] = cq
        return notes

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(os.path.join(self.directory, topic, str(queue_id)), topic, queue_id, self.file_size)

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            with self._lock:
                cq = self.queues.setdefault((topic, queue_id), self._new(topic, queue_id))
        return cq

    def all(self) -> list[ConsumeQueue]:
        return list(self.queues.values())

    def topics(self) -> list[str]:
        return sorted({topic for topic, _ in list(self.queues)})

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(qid for t, qid in list(self.queues) if t == topic)

    def prepare(self, topic: str, count: int) -> int:
        """Create ``topic``'s missing queues 0 to ``count`` - 1, each with its first file
        made, its first page reserved and warmed and the file mapped, as Kafka makes a partition's
        files when the topic is created; return how many were made. A queue's first
        message then costs what any other does: making, reserving and mapping a file
        (an inode allocation, a dozen system calls and the Python objects around them)
        cost ~70 µs a queue on the send path, more than storing the 16 messages of a
        batch. Past `mapping_budget` (descriptors and mappings are limited: each mapped
        file holds one of each) the file is only made and sized, and mapped by its first
        message. Only new directories get a file: an existing queue's first file may be
        gone to retention."""
        made = 0
        budget = mapping_budget()
        for queue_id in range(count):
            directory = os.path.join(self.directory, topic, str(queue_id))
            try:
                os.makedirs(directory)
            except FileExistsError:
                continue
            made += 1
            if len(self.queues) >= budget:
                MappedFile.prepare(os.path.join(directory, file_name(0)), self.file_size)
                continue
            cq = self._new(topic, queue_id)
            try:
                cq.prepare_first()
            except FileExistsError:  # its first message made it meanwhile
                continue
            with self._lock:
                if self.queues.setdefault((topic, queue_id), cq) is not cq:
                    cq.files.close()
        return made

    def delete_topic(self, topic: str) -> int:
        """Remove the topic's queues and their files; return how many queues there were."""
        with self._lock:
            gone = [self.queues.pop(key) for key in [k for k in self.queues if k[0] == topic]]
        for cq in gone:
            cq.files.destroy()
        shutil.rmtree(os.path.join(self.directory, topic), ignore_errors=True)
        return len(gone)

    def max_phys_end(self) -> int | None:
        """The end of the furthest record any queue points at (None: no entries anywhere)."""
        ends = [e[0] + e[1] for e in (cq.entry(cq.max_offset - 1) for cq in self.all()) if e is not None]
        return max(ends, default=None)

    def truncate_phys(self, phys_end: int) -> int:
        return sum(cq.truncate_phys(phys_end) for cq in self.all())

    def delete_below_phys(self, min_phys: int) -> int:
        return sum(cq.delete_below_phys(min_phys) for cq in self.all())

    def flush(self, least_pages: int = 0) -> int | None:
        """fsync every queue with ``least_pages`` pages of new entries or more (0: every
        queue with new entries); past `SYNCFS_MIN_QUEUES` of them, one syncfs of the
        store's file system does it for all (see there), the others included. Return
        the lowest CommitLog offset of an entry left unflushed, None when none is: the
        checkpoint must stay below it. As in RocketMQ, a queue written a few entries a
        second is then fsynced by the thorough flush, not every second: with traffic
        spread over 16,384 queues, writing back 16k files a second cost the broker
        more CPU than storing their messages."""
        unflushed = [(cq, cq.max_offset) for cq in self.all() if cq.unflushed]
        due: list[ConsumeQueue] = []
        waiting: list[ConsumeQueue] = []
        for cq, target in unflushed:
            (due if cq.unflushed_pages(target) >= least_pages else waiting).append(cq)
        if len(due) >= SYNCFS_MIN_QUEUES and _sync_filesystem(due[0]):
            for cq, target in unflushed:
                cq.flushed_by_filesystem(target)
            self.flush_count += len(unflushed)
            return None
        self.flush_count += sum(cq.flush() for cq in due)
        left = (cq.first_unflushed_record() for cq in waiting)
        return min((offset for offset in left if offset is not None), default=None)

    def close(self) -> None:
        for cq in self.all():
            cq.files.close()


def mapping_budget() -> int:
    """How many queues the store may hold before `ConsumeQueueTable.prepare` stops
    mapping new queues' files ahead of their first message: half the kernel's mappings
    per process (``vm.max_map_count``) and the open-file limit less `FD_HEADROOM`."""
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            maps = int(f.read())
    except (OSError, ValueError):
        maps = 65530  # Linux's default
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    files = maps if soft == resource.RLIM_INFINITY else soft - FD_HEADROOM
    return max(0, min(maps // 2, files))


def _sync_filesystem(cq: ConsumeQueue) -> bool:
    files = cq.files.files
    return bool(files) and files[-1].sync_filesystem()


def put_queue_entries_py(mm: mmap.mmap | memoryview, pos: int, physical_offsets: Sequence[int],
                         sizes: Sequence[int], tag_codes: Sequence[int], first: int, stop: int) -> None:
    """Write entries ``first`` to ``stop`` of the columns at file position ``pos``, one
    ``pack_into`` each (a struct repeating the entry for the whole run, fed by a chain of
    the columns, measured no cheaper for 32 entries and dearer for one)."""
    pack = ENTRY.pack_into
    for i in range(first, stop):
        pack(mm, pos, physical_offsets[i], sizes[i], tag_codes[i])
        pos += CQ_ENTRY_BYTES


put_queue_entries = kernels.select("put_queue_entries", put_queue_entries_py, "skiff.store._kernels")
