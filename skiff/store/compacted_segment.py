"""A compacted queue's files: the records that survived compaction, with their queue offsets.

Under ``compaction/<topic>/<queueId>/`` (byte tables in docs/compaction.md):

- ``MANIFEST`` names the live generation and the cleaned point: every entry of the
  queue below ``cleaned_offset`` is read from this segment, the rest from the
  ConsumeQueue. It is replaced atomically (``MANIFEST.tmp``, fsync, rename, fsync
  of the directory), so a crash leaves the old or the new generation, never a mix.
- ``<generation>.data``: the surviving CommitLog records, byte for byte, back to
  back in queue-offset order (their QUEUEOFFSET and PHYSICALOFFSET fields unchanged,
  so clients see the offsets and message ids they always had).
- ``<generation>.index``: one ``SEGMENT_ENTRY`` per record (queue offset, position in
  the data file, size, tag code), sorted by queue offset; gaps are the removed records.

Files of other generations, and a ``MANIFEST.tmp``, are leftovers of a compaction
that crashed and are deleted at load. Reads take no lock: a segment is immutable,
and the queue's segment is swapped for the next one by one reference assignment.
"""

from __future__ import annotations

import mmap
import os
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from skiff.common.errors import CorruptionError
from skiff.common.files import fsync_dir, replace_atomically

MANIFEST = "MANIFEST"
MANIFEST_MAGIC = 0x534B434D  # "SKCM"
MANIFEST_VERSION = 1
_MANIFEST = struct.Struct(">IIqqqqqqqqq")
_CRC = struct.Struct(">I")
SEGMENT_ENTRY = struct.Struct(">qqiq")
SEGMENT_DTYPE = np.dtype([("offset", ">i8"), ("pos", ">i8"), ("size", ">i4"), ("tag", ">i8")])
assert SEGMENT_DTYPE.itemsize == SEGMENT_ENTRY.size == 28

StepHook = Callable[[str], None]
"""Called after each durable step of a compaction with the step's name (crash tests
stop the process there); the default does nothing."""


def _no_step(step: str) -> None:
    pass


@dataclass(frozen=True, slots=True)
class Manifest:
    generation: int
    start_offset: int
    """The lowest queue offset the segment covers (the queue's min offset at the first compaction)."""
    cleaned_offset: int
    """Entries below this offset live in the segment; from it on, in the ConsumeQueue."""
    entry_count: int
    data_bytes: int
    last_run_ms: int
    bytes_reclaimed: int
    """Record bytes compaction has dropped from this queue, over all runs."""
    runs: int
    oldest_tombstone_ms: int
    """Store time of the oldest tombstone the segment keeps (-1: none): when it passes
    delete.retention.ms, a pass runs even without new dirty records."""

    def encode(self) -> bytes:
        head = _MANIFEST.pack(MANIFEST_MAGIC, MANIFEST_VERSION, self.generation, self.start_offset,
                              self.cleaned_offset, self.entry_count, self.data_bytes, self.last_run_ms,
                              self.bytes_reclaimed, self.runs, self.oldest_tombstone_ms)
        return head + _CRC.pack(zlib.crc32(head))

    @classmethod
    def decode(cls, raw: bytes, where: str) -> Manifest:
        if len(raw) != _MANIFEST.size + _CRC.size or zlib.crc32(raw[:_MANIFEST.size]) != _CRC.unpack_from(
                raw, _MANIFEST.size)[0]:
            raise CorruptionError(f"{where}: damaged compaction manifest ({len(raw)} bytes, bad size or CRC)")
        magic, version, *fields = _MANIFEST.unpack_from(raw)
        if magic != MANIFEST_MAGIC or version != MANIFEST_VERSION:
            raise CorruptionError(f"{where}: not a compaction manifest (magic {magic:#x}, version {version})")
        return cls(*fields)


def _name(generation: int, suffix: str) -> str:
    return f"{generation:020d}.{suffix}"


class Segment:
    """One generation of a queue's compacted records, mapped read-only."""

    def __init__(self, directory: str, manifest: Manifest) -> None:
        self.directory = directory
        self.manifest = manifest
        self._data = _map(os.path.join(directory, _name(manifest.generation, "data")), manifest.data_bytes)
        index = _map(os.path.join(directory, _name(manifest.generation, "index")),
                     manifest.entry_count * SEGMENT_ENTRY.size)
        self.entries = np.frombuffer(index, SEGMENT_DTYPE) if index is not None else np.empty(0, SEGMENT_DTYPE)
        self.offsets = self.entries["offset"].astype(np.int64)

    @property
    def start_offset(self) -> int:
        return self.manifest.start_offset

    @property
    def cleaned_offset(self) -> int:
        return self.manifest.cleaned_offset

    def first_at(self, offset: int) -> int:
        """Index of the first entry at or after queue offset ``offset``."""
        return int(np.searchsorted(self.offsets, offset))

    def record(self, i: int) -> memoryview:
        e = self.entries[i]
        pos = int(e["pos"])
        assert self._data is not None
        return memoryview(self._data)[pos : pos + int(e["size"])]

    def view(self, start: int, end: int) -> memoryview:
        assert self._data is not None
        return memoryview(self._data)[start:end]


def _map(path: str, size: int) -> mmap.mmap | None:
    """``path`` mapped read-only; its size must be ``size`` (what the manifest says)."""
    actual = os.path.getsize(path)
    if actual != size:
        raise CorruptionError(f"{path}: {actual} bytes, the compaction manifest says {size}")
    if not size:
        return None
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)


def load_segment(directory: str) -> Segment | None:
    """The queue's live segment (None: never compacted); leftovers of a crashed run go."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, "rb") as f:
            manifest = Manifest.decode(f.read(), path)
    except FileNotFoundError:
        manifest = None
    keep = set() if manifest is None else {_name(manifest.generation, "data"), _name(manifest.generation, "index"),
                                           MANIFEST}
    for name in os.listdir(directory):
        if name not in keep:
            os.unlink(os.path.join(directory, name))
    return None if manifest is None else Segment(directory, manifest)


class SegmentWriter:
    """Writes the next generation: records and entries appended in queue-offset order, then
    `commit` makes them durable and switches the manifest to them."""

    def __init__(self, directory: str, generation: int, step: StepHook = _no_step) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.generation = generation
        self.step = step
        self._data = open(os.path.join(directory, _name(generation, "data")), "xb")  # noqa: SIM115
        self._index = open(os.path.join(directory, _name(generation, "index")), "xb")  # noqa: SIM115
        self.count = 0
        self.pos = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_entries: list[bytes] = []

    def add(self, offset: int, record: memoryview | bytes, tag: int) -> None:
        size = len(record)
        self._pending.append(record)
        self._pending_entries.append(SEGMENT_ENTRY.pack(offset, self.pos, size, tag))
        self.pos += size
        self.count += 1
        if len(self._pending) >= 4096:
            self._drain()

    def _drain(self) -> None:
        self._data.write(b"".join(self._pending))
        self._index.write(b"".join(self._pending_entries))
        self._pending.clear()
        self._pending_entries.clear()

    def commit(self, manifest: Manifest) -> None:
        """fsync the data and index, then switch the manifest (each step reported)."""
        self._drain()
        for f, step in ((self._data, "data-synced"), (self._index, "index-synced")):
            f.flush()
            os.fsync(f.fileno())
            f.close()
            self.step(step)
        fsync_dir(self.directory)
        replace_atomically(os.path.join(self.directory, MANIFEST), manifest.encode(),
                           before_rename=lambda: self.step("manifest-tmp-written"))
        self.step("manifest-switched")

    def abandon(self) -> None:
        """Close and delete the unfinished generation (a compaction that failed)."""
        for f in (self._data, self._index):
            f.close()
            try:
                os.unlink(f.name)
            except FileNotFoundError:
                pass


def remove_generation(directory: str, generation: int) -> int:
    """Delete one generation's files; return the bytes they held."""
    freed = 0
    for suffix in ("data", "index"):
        path = os.path.join(directory, _name(generation, suffix))
        try:
            freed += os.path.getsize(path)
            os.unlink(path)
        except FileNotFoundError:
            pass
    return freed


def remove_queue_dirs(root: str, topic: str) -> None:
    shutil.rmtree(os.path.join(root, topic), ignore_errors=True)
