"""Fixed-size memory-mapped files and ordered queues of them.

Every store file (CommitLog, ConsumeQueue, index) is a `MappedFile`: a file of a
fixed size, mapped whole, written through the mapping. Writing through a mapping
into a block the file system has not allocated yet kills the process with SIGBUS
when the disk is full, so nothing is written before `MappedFile.ensure_reserved`
has allocated the blocks with ``posix_fallocate``. That call fails with ENOSPC
instead, and the caller turns it into a DISK_FULL status. CommitLog files reserve
their whole size when they are created; ConsumeQueue and index files are sparse
and reserve `RESERVE_CHUNK_BYTES` ahead of their write position, so a thousand
idle queues do not hold a thousand full files of disk.

Reading a hole through a shared mapping is no safer: on tmpfs the read fault
allocates a page and raises SIGBUS when none is left. So a mapping is only ever
touched below the reserved or written part of its file; code that must look at
a file's unknown extent (loading a ConsumeQueue) uses `data_extent` and `pread`,
which never allocate.

ConsumeQueue mappings are advised MADV_RANDOM (`advise_random`): the
first write into a fresh page of a sparse file faults it in, and with the default
advice the kernel reads ahead (zero-fills) a large folio around it inside that
fault, while the writer holds the GIL. Measured on a store appending one batch to
each of 2,048 new queues: 2.1 ms of CPU per new queue with the default advice,
0.65 ms with MADV_RANDOM (the rest is mkdir and open). Pages already cached are
mapped around a fault either way, so reads of hot queues are unchanged.

ConsumeQueue files hold no descriptor of their own (``hold_fd=False``): Python's
``mmap`` keeps a duplicate of the descriptor it maps, so a file that also kept its
own would hold two, and 16,384 queues (20,000+ files) would need twice the
descriptors the store needs. They are written through the mapping and synced with
msync (by address), so the file is opened briefly, by path, only for what needs a
descriptor: growing its reservation, ``pread``/``SEEK_DATA`` at load, the fdatasync
fallback and syncfs. RocketMQ, too, keeps one descriptor per mapped file. The
CommitLog keeps its own: it writes with ``pwrite``.

A mapping whose slices are still referenced (a pull answer on its way to a
socket) cannot be unmapped; `close` then leaves it to Python, which unmaps it
when the last slice is released. The file is unlinked at once either way.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from contextlib import contextmanager
import mmap
import os
import re
import threading

import numpy as np

from skiff.common.errors import ConfigError, CorruptionError
from skiff.store import pages

log = logging.getLogger(__name__)

RESERVE_CHUNK_BYTES = 1 << 20
"""Blocks sparse files allocate ahead of their write position, so most appends need no syscall."""

_NAME = re.compile(r"^\d{20}$")
_ZERO_SCAN_BYTES = 1 << 20


def file_name(offset: int) -> str:
    """The 20-digit, zero-padded start offset that names a CommitLog or ConsumeQueue file."""
    return f"{offset:020d}"


class MappedFile:
    """One fixed-size file mapped into memory, covering offsets [start, start + size)."""

    __slots__ = ("_address", "_lock", "closed", "fd", "mm", "path", "reserved", "size", "start")

    def __init__(self, path: str, start: int, size: int, fd: int, reserved: int, *, hold_fd: bool = True) -> None:
        """Map ``fd``; it is this object's to close (at once unless ``hold_fd``: see the module docstring)."""
        self.path = path
        self.start = start
        self.size = size
        self.mm = mmap.mmap(fd, size)
        self._address = pages.address_of(self.mm)
        self.reserved = reserved
        self._lock = threading.Lock()
        self.closed = False
        self.fd = fd
        """The descriptor this file holds (-1: none, ``hold_fd`` False): what `write` and the
        store's one-call append of a run (`skiff.store.run_write`) write through."""
        if not hold_fd:
            self.fd = -1
            os.close(fd)

    @classmethod
    def create(cls, path: str, start: int, size: int, *, reserve_bytes: int, hold_fd: bool = True) -> MappedFile:
        """Make a new file; reserve its first ``reserve_bytes`` (at most its size). Raises OSError (ENOSPC)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        reserve_bytes = min(reserve_bytes, size)
        try:
            os.ftruncate(fd, size)
            if reserve_bytes:
                os.posix_fallocate(fd, 0, reserve_bytes)
            return cls(path, start, size, fd, reserve_bytes, hold_fd=hold_fd)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise

    @staticmethod
    def prepare(path: str, size: int) -> bool:
        """Make a new, sized, empty file without mapping or keeping it (a queue's first file
        made ahead of its first message); False if it exists. Raises OSError."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        return True

    @classmethod
    def open(cls, path: str, start: int, size: int, *, hold_fd: bool = True) -> MappedFile:
        """Map an existing file, extending a short one first (the caller decides if that is allowed)."""
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)
            return cls(path, start, size, fd, 0, hold_fd=hold_fd)
        except BaseException:
            os.close(fd)
            raise

    @contextmanager
    def _descriptor(self) -> Iterator[int]:
        """The file's descriptor: the held one, or the path opened for this use only."""
        if self.fd >= 0:
            yield self.fd
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            yield fd
        finally:
            os.close(fd)

    @property
    def end(self) -> int:
        return self.start + self.size

    def advise_random(self) -> None:
        """No read-ahead on faults: for files written or read a page here and there."""
        self.mm.madvise(mmap.MADV_RANDOM)

    def ensure_reserved(self, upto: int, chunk: int = RESERVE_CHUNK_BYTES) -> None:
        """Allocate blocks so that writes below file position ``upto`` cannot SIGBUS."""
        if upto <= self.reserved:
            return
        new = min(self.size, max(upto, self.reserved + chunk))
        with self._descriptor() as fd:
            os.posix_fallocate(fd, self.reserved, new - self.reserved)
        self.reserved = new

    def view(self, pos: int, length: int) -> memoryview:
        """A zero-copy slice at file position ``pos``; ValueError once the file is closed."""
        return memoryview(self.mm)[pos : pos + length]

    def pread(self, pos: int, length: int) -> bytes:
        """Read without the mapping: holes read as zeros and allocate nothing."""
        with self._descriptor() as fd:
            return os.pread(fd, length, pos)

    def data_extent(self, pos: int = 0) -> tuple[int, int] | None:
        """[first, end) of the first run of data the file system reports at or after
        ``pos`` (holes skipped), or None when only hole follows."""
        with self._descriptor() as fd:
            try:
                lo = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    return None
                raise
            return lo, min(self.size, os.lseek(fd, lo, os.SEEK_HOLE))

    def sync(self, lo: int = 0, hi: int | None = None) -> bool:
        """fdatasync file bytes [lo, hi) (the whole file by default; the kernel writes the
        mapping's dirty pages), with the GIL released; False if closed."""
        with self._lock:
            if self.closed:
                return False
            if hi is None or not pages.sync(self._address, lo, min(hi, self.size)):
                with self._descriptor() as fd:
                    os.fdatasync(fd)
            return True

    def write(self, pos: int, data: memoryview) -> None:
        """Write ``data`` at file position ``pos`` through the file descriptor (``pwrite``,
        the GIL released), not through the mapping: see docs/store.md, "Writing". Raises
        OSError (a full disk answers ENOSPC here, where a store into the mapping would be
        SIGBUS). Only files that hold their descriptor (the CommitLog's) are written so: it
        is on the append path, which opens nothing."""
        fd = self.fd
        assert fd >= 0, "written files hold their descriptor"
        done = os.pwrite(fd, data, pos)
        while done < len(data):  # a short write (a signal, a nearly full disk): the rest
            done += os.pwrite(fd, data[done:], pos + done)

    def sync_filesystem(self) -> bool:
        """syncfs the file system this file is on (`skiff.store.pages.syncfs`), with the GIL
        released; False if closed or unsupported (the caller then syncs file by file)."""
        with self._lock:
            if self.closed:
                return False
            with self._descriptor() as fd:
                return pages.syncfs(fd)

    def drop(self, lo: int, hi: int) -> bool:
        """Drop file bytes [lo, hi) (flushed) from the mapping and the page cache
        (`skiff.store.pages.drop`); False if closed or unsupported."""
        with self._lock:
            if self.closed:
                return False
            with self._descriptor() as fd:
                return pages.drop(self._address, fd, lo, min(hi, self.size))

    def zero_from(self, pos: int) -> int:
        """Zero every non-zero byte from ``pos`` to the end; return how many bytes were dirty.

        The file is read with ``pread`` over the runs of data the file system reports
        (`data_extent`), never through the mapping: recovery cuts the tail of a 1 GiB
        CommitLog file this way, and reading it through the mapping faulted the whole
        file into the process (1.1 GB of RSS after a restart over 7 MB of messages).
        Blocks reserved but never written are holes to SEEK_DATA on ext4 and XFS, so
        they are not even read. Only the non-zero bytes are written (``pwrite``: a
        full disk answers ENOSPC, not SIGBUS), so a sparse or fresh tail stays
        unallocated.
        """
        dirty = 0
        with self._descriptor() as fd:
            for first, last in self._nonzero_runs(fd, pos):
                os.pwrite(fd, bytes(last - first), first)
                dirty = last - pos
        return dirty

    def holds_data(self) -> bool:
        """Whether any byte of the file is non-zero, read as `zero_from` reads: a queue's
        first file made (and its first page warmed with zeros) ahead of its first message
        holds nothing yet."""
        with self._descriptor() as fd:
            return next(self._nonzero_runs(fd, 0), None) is not None

    def _nonzero_runs(self, fd: int, pos: int) -> Iterator[tuple[int, int]]:
        """[first, last) of the non-zero bytes of each `_ZERO_SCAN_BYTES` block of the
        file's data from ``pos`` on (holes skipped, blocks without any left out)."""
        lo = pos
        while lo < self.size:
            extent = self.data_extent(lo)
            if extent is None:
                return
            lo, stop = max(lo, extent[0]), extent[1]
            while lo < stop:
                hi = min(stop, (lo // _ZERO_SCAN_BYTES + 1) * _ZERO_SCAN_BYTES)
                nonzero = np.flatnonzero(np.frombuffer(os.pread(fd, hi - lo, lo), np.uint8))
                if len(nonzero):
                    yield lo + int(nonzero[0]), lo + int(nonzero[-1]) + 1
                lo = hi

    def warm(self, length: int) -> None:
        """Write a zero into each page below ``length`` (reserved: see `ensure_reserved`),
        so the first writes there find the pages mapped and writable instead of faulting
        them in, as RocketMQ warms new files (``warmMapedFileEnable``)."""
        for pos in range(0, min(length, self.reserved), mmap.PAGESIZE):
            self.mm[pos] = 0

    def release(self) -> None:
        """Drop this process's page mappings (``MADV_DONTNEED``; the page cache keeps the
        data, dirty pages included), so what recovery read does not stay in its RSS."""
        with self._lock:
            if not self.closed:
                self.mm.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.mm.close()
            except BufferError:
                log.debug("%s: slices still referenced; unmapped when they are released", self.path)
            if self.fd >= 0:
                os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, start={self.start})"


class MappedFileQueue:
    """Files of one size named by their start offset, back to back: a CommitLog or one ConsumeQueue.

    ``files`` is replaced, never changed in place, so a reader that took it keeps a
    consistent list while retention removes files or the writer adds one.
    """

    def __init__(self, directory: str, file_size: int, *, reserve_on_create: int, size_key: str,
                 random_access: bool = False, hold_fd: bool = True) -> None:
        self.directory = directory
        self.random_access = random_access
        """Advise every mapping MADV_RANDOM (ConsumeQueues: see the module docstring)."""
        self.hold_fd = hold_fd
        """Files keep their own descriptor (False for ConsumeQueues: see the module docstring)."""
        self.file_size = file_size
        self.size_key = size_key
        """The configuration key of ``file_size``, for errors."""
        self.reserve_on_create = reserve_on_create
        self.files: tuple[MappedFile, ...] = ()
        self.extended_start: int | None = None
        """Start of a last file that was too short at load (now extended): its contents are suspect."""
        self._lock = threading.Lock()

    def _advised(self, f: MappedFile) -> MappedFile:
        if self.random_access:
            f.advise_random()
        return f

    def load(self) -> list[str]:
        """Map the files on disk. A last file that is too short (its creation or its tail
        was cut) is extended and noted; a longer file means the file size setting changed,
        and nothing is cut: that is a ConfigError."""
        if not os.path.isdir(self.directory):
            return []
        names = sorted(n for n in os.listdir(self.directory) if _NAME.match(n))
        notes: list[str] = []
        files: list[MappedFile] = []
        for i, name in enumerate(names):
            path = os.path.join(self.directory, name)
            start = int(name)
            self._check_place(path, start, files)
            actual = os.path.getsize(path)
            if actual > self.file_size:
                raise ConfigError(
                    f"{self.size_key}: {self.file_size}, but {path} is {actual} bytes; "
                    "set it as when the files were written"
                )
            if actual != self.file_size:
                if i != len(names) - 1:
                    raise CorruptionError(
                        f"{path} is {actual} bytes, not {self.file_size}; only the last file may be short"
                    )
                notes.append(f"{path}: {actual} bytes extended to {self.file_size}")
                self.extended_start = start
            files.append(self._advised(MappedFile.open(path, start, self.file_size, hold_fd=self.hold_fd)))
        self.files = tuple(files)
        return notes

    def _check_place(self, path: str, start: int, files: list[MappedFile]) -> None:
        if start % self.file_size:
            raise CorruptionError(f"{path}: start offset is not a multiple of {self.size_key}={self.file_size}")
        if files and start != files[-1].end:
            raise CorruptionError(f"{path}: expected the file after {files[-1].path} to start at {files[-1].end}")

    @property
    def min_offset(self) -> int | None:
        files = self.files
        return files[0].start if files else None

    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    def find(self, offset: int) -> MappedFile | None:
        """The file holding ``offset``, or None."""
        files = self.files
        if not files:
            return None
        i = (offset - files[0].start) // self.file_size
        if 0 <= i < len(files):
            return files[i]
        return None

    def get_or_create(self, offset: int) -> MappedFile:
        """The file holding ``offset``, created (with any files between) when missing. Raises OSError."""
        f = self.find(offset)
        if f is not None:
            return f
        start = offset - offset % self.file_size
        last = self.last()
        if last is not None and start < last.start:
            raise CorruptionError(f"{self.directory}: offset {offset} is below the first file")
        os.makedirs(self.directory, exist_ok=True)
        next_start = start if last is None else last.end
        while True:
            path = os.path.join(self.directory, file_name(next_start))
            new = self._advised(self._create(path, next_start))
            with self._lock:
                self.files = (*self.files, new)
            if new.start == start:
                return new
            next_start = new.end

    def _create(self, path: str, start: int) -> MappedFile:
        """A new file at ``start``, or the empty one `MappedFile.prepare` made there.
        A file with data there that this queue does not hold raises FileExistsError."""
        try:
            return MappedFile.create(path, start, self.file_size, reserve_bytes=self.reserve_on_create,
                                     hold_fd=self.hold_fd)
        except FileExistsError:
            f = MappedFile.open(path, start, self.file_size, hold_fd=self.hold_fd)
            if f.holds_data():
                f.close()
                raise
        f.ensure_reserved(self.reserve_on_create, chunk=0)
        return f

    def create_first(self, reserve_bytes: int) -> MappedFile:
        """Make and map an empty queue's first file (start 0) ahead of its first write.
        Raises FileExistsError when the file is there already, OSError (ENOSPC)."""
        f = self._advised(MappedFile.create(os.path.join(self.directory, file_name(0)), 0, self.file_size,
                                            reserve_bytes=reserve_bytes, hold_fd=self.hold_fd))
        with self._lock:
            self.files = (f,)
        return f

    def sync_range(self, lo: int, hi: int) -> int:
        """fdatasync offsets [lo, hi) of the files they fall in (only those pages: the tail
        page the writer is still filling stays out); return how many files were synced."""
        return sum(1 for f in self.files if f.end > lo and f.start < hi and f.sync(max(lo, f.start) - f.start,
                                                                                   min(hi, f.end) - f.start))

    def remove_from(self, offset: int) -> int:
        """Delete every file that starts at or after ``offset``; return how many."""
        with self._lock:
            keep = tuple(f for f in self.files if f.start < offset)
            gone = self.files[len(keep):]
            self.files = keep
        for f in gone:
            f.destroy()
        return len(gone)

    def remove_head(self, count: int) -> list[MappedFile]:
        """Delete the first ``count`` files (retention)."""
        with self._lock:
            gone, self.files = self.files[:count], self.files[count:]
        for f in gone:
            f.destroy()
        return list(gone)

    def close(self) -> None:
        with self._lock:
            files, self.files = self.files, ()
        for f in files:
            f.close()

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, ()
        for f in files:
            f.destroy()
        try:
            os.rmdir(self.directory)
        except OSError:
            pass
