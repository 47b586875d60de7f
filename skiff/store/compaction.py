"""Compaction: keep the latest record of every key of a queue, with its queue offset.

Kafka's log cleaner, per queue: a pass builds an `OffsetMap` (key hash -> last
queue offset) over the dirty part, from the cleaned point on, as far as the map's
room allows; then it copies the segment's records and the dirty records it
covered into a new generation (`skiff.store.compacted_segment`), leaving out every
record a later one of the same key supersedes, and tombstones (empty bodies) older
than ``delete.retention.ms``. A full map ends the pass early and the next pass
goes on from there (multi-pass). The map holds hashes only: before a record is
dropped, the key of the record that supersedes it is read and compared, so a hash
collision keeps both records instead of losing one.

Only records already flushed and dispatched are compacted (the active tail is
left alone), and appends never wait: a compaction reads the CommitLog and writes
its own files. After the manifest switch the queue's ConsumeQueue files wholly
below the cleaned point are deleted; the CommitLog is shared by every topic and
its files go by retention as before.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from skiff.common.clock import Clock
from skiff.common.properties import Prop
from skiff.common.record import BORN_HOST_AT, HOST_V4_BYTES, HOST_V6_BYTES, SYSFLAG_AT, head_struct_for
from skiff.common.sysflag import MessageSysFlag
from skiff.common.stored_message import raw_property
from skiff.store.commitlog import CommitLog
from skiff.store.compacted_segment import (
    Manifest,
    Segment,
    SegmentWriter,
    StepHook,
    load_segment,
    remove_generation,
    remove_queue_dirs,
)
from skiff.store.consume_queue import ConsumeQueue, ConsumeQueueTable

BORNHOST_V6 = int(MessageSysFlag.BORNHOST_V6)
OFFSET_MAP_BYTES_PER_ENTRY = 64
"""Budget per map entry: 16 bytes held (hash and offset, int64 each) and the copies a
merge of new entries into the sorted arrays briefly makes."""
_CHUNK = 4096
_KEY_CACHE_MAX = 65_536
"""Keys of superseding records remembered during a copy pass (at most the map's entries):
a key with many old versions is then read once, not once per dropped version."""

KeyHash = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What one `Compaction.compact` call did."""

    topic: str
    queue_id: int
    passes: int
    cleaned_offset: int
    records_read: int
    """Records every pass read, summed (a multi-pass run reads the kept ones again)."""
    records_kept: int
    """Records in the queue's segment after the run."""
    bytes_read: int
    bytes_written: int
    bytes_reclaimed: int
    elapsed_ms: float


@dataclass(frozen=True, slots=True)
class CompactionStatus:
    topic: str
    queue_id: int
    start_offset: int
    cleaned_offset: int
    """Queue offsets below this were compacted; from it on the queue is dirty."""
    max_offset: int
    segment_records: int
    segment_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    """dirty / (segment + dirty) bytes."""
    last_run_ms: int
    """Store time of the last compaction that changed the queue (0: never)."""
    bytes_reclaimed: int
    runs: int
    oldest_tombstone_ms: int
    """Store time of the oldest tombstone the segment keeps (-1: none)."""
    holds_retention: bool
    """The queue's first dirty record lies in a CommitLog file older than the newest:
    retention keeps that file (and those after it) until the queue is compacted."""


class OffsetMap:
    """Key hash -> the queue offset of its latest record, in two sorted int64 arrays."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.hashes = np.empty(0, np.int64)
        self.offsets = np.empty(0, np.int64)

    @property
    def room(self) -> int:
        return self.capacity - len(self.hashes)

    def add(self, hashes: list[int], offsets: list[int]) -> None:
        """Merge records given in offset order; at most `room` of them (each adds at most one entry)."""
        assert len(hashes) <= self.room
        h = np.concatenate((self.hashes, np.array(hashes, np.int64)))
        o = np.concatenate((self.offsets, np.array(offsets, np.int64)))
        order = np.argsort(h, kind="stable")  # equal hashes keep offset order: the last is the latest
        h, o = h[order], o[order]
        last = np.ones(len(h), bool)
        last[:-1] = h[1:] != h[:-1]
        self.hashes, self.offsets = h[last], o[last]

    def lookup(self, hashes: list[int]) -> np.ndarray:
        """The latest offset of each hash, -1 where the map has none."""
        h = np.array(hashes, np.int64)
        if not len(self.hashes):
            return np.full(len(h), -1, np.int64)
        i = np.minimum(np.searchsorted(self.hashes, h), len(self.hashes) - 1)
        return np.where(self.hashes[i] == h, self.offsets[i], -1)


class _Rec:
    """One record met by a pass: its queue offset, bytes, tag code and key (None: no KEYS)."""

    __slots__ = ("offset", "view", "tag", "key", "tombstone", "store_ts")

    def __init__(self, offset: int, view: memoryview, tag: int) -> None:
        self.offset = offset
        self.view = view
        self.tag = tag
        self.key, body_length = _key_and_body_length(view)
        self.tombstone = body_length == 0
        self.store_ts = _store_timestamp(view) if self.tombstone else 0


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _key_and_body_length(view: memoryview) -> tuple[str | None, int]:
    """The record's whole KEYS property (None without one) and its body length: the two
    fields every record a pass meets is asked for, read without decoding the rest."""
    head = head_struct_for(_I32.unpack_from(view, SYSFLAG_AT)[0]).size
    body_length = _I32.unpack_from(view, head - _I32.size)[0]  # BODY length: the int32 before the body
    p = head + body_length
    p += 1 + view[p]
    props_length = _I16.unpack_from(view, p)[0]
    return raw_property(bytes(view[p + 2 : p + 2 + props_length]), Prop.KEYS), body_length


def _key_of(view: memoryview) -> str | None:
    return _key_and_body_length(view)[0]


def _store_timestamp(view: memoryview) -> int:
    born_host = HOST_V6_BYTES if _I32.unpack_from(view, SYSFLAG_AT)[0] & BORNHOST_V6 else HOST_V4_BYTES
    timestamp: int = _I64.unpack_from(view, BORN_HOST_AT + born_host)[0]  # STORETIMESTAMP follows the born host
    return timestamp


def _python_hash(key: str) -> int:
    return hash(key)


class Compaction:
    """The compacted segments of every queue and the procedure that makes them."""

    def __init__(self, root: str, commitlog: CommitLog, queues: ConsumeQueueTable, clock: Clock,
                 safe_offset: Callable[[], int], maintenance_lock: threading.Lock,
                 checkpoint: Callable[[], bool]) -> None:
        self.root = root
        self.commitlog = commitlog
        self.queues = queues
        self.clock = clock
        self._safe_offset = safe_offset
        self._maintenance = maintenance_lock
        self._checkpoint = checkpoint
        """Makes the store's checkpoint cover the compacted records before their ConsumeQueue
        files go, so recovery never re-dispatches into deleted files."""
        self.segments: dict[tuple[str, int], Segment] = {}
        """The live segment of each compacted queue; the read path looks here first."""
        self._run_lock = threading.Lock()
        self.key_hash: KeyHash = _python_hash
        """Replaceable by tests (a weak hash forces collisions)."""
        self.retained_topics: frozenset[str] | None = None
        """Topics whose dirty records retention keeps (the broker sets its compacted topics);
        None: every topic with a compacted segment."""

    def load(self) -> None:
        if not os.path.isdir(self.root):
            return
        for topic in sorted(os.listdir(self.root)):
            for qid in sorted(os.listdir(os.path.join(self.root, topic))):
                if qid.isdigit():
                    seg = load_segment(os.path.join(self.root, topic, qid))
                    if seg is not None:
                        self.segments[(topic, int(qid))] = seg

    def close(self) -> None:
        self.segments.clear()

    def delete_topic(self, topic: str) -> None:
        with self._run_lock:
            for key in [k for k in self.segments if k[0] == topic]:
                del self.segments[key]
            remove_queue_dirs(self.root, topic)

    # -- status -------------------------------------------------------------------

    def status(self, topic: str, queue_id: int) -> CompactionStatus:
        cq = self.queues.get(topic, queue_id)
        seg = self.segments.get((topic, queue_id))
        max_offset = 0 if cq is None else cq.max_offset
        cleaned = seg.cleaned_offset if seg else (0 if cq is None else cq.min_offset)
        dirty = 0 if cq is None else _bytes_between(cq, max(cleaned, cq.min_offset), max_offset)
        first_dirty = None if cq is None or seg is None else _dirty_start_phys(cq, seg)
        newest = self.commitlog.files.last()
        m = seg.manifest if seg else None
        clean = m.data_bytes if m else 0
        return CompactionStatus(
            topic, queue_id, seg.start_offset if seg else cleaned, cleaned, max_offset,
            m.entry_count if m else 0, clean, dirty, dirty / (clean + dirty) if clean + dirty else 0.0,
            m.last_run_ms if m else 0, m.bytes_reclaimed if m else 0, m.runs if m else 0,
            m.oldest_tombstone_ms if m else -1,
            first_dirty is not None and newest is not None and first_dirty < newest.start,
        )

    def pinned_offset(self) -> int | None:
        """The CommitLog offset retention must not delete from: the first dirty record of
        every compacted queue (None: nothing to keep). Kafka's guarantee that a compacted
        log loses no key to retention."""
        retained = self.retained_topics
        starts = [_dirty_start_phys(cq, seg) for (topic, queue_id), seg in list(self.segments.items())
                  if (retained is None or topic in retained) and (cq := self.queues.get(topic, queue_id)) is not None]
        return min((p for p in starts if p is not None), default=None)

    # -- compaction ---------------------------------------------------------------

    def compact(self, topic: str, queue_id: int, *, delete_retention_ms: int, max_offset_map_size: int,
                step: StepHook | None = None) -> CompactionReport:
        """Compact the queue's flushed part now, in as many passes as the map needs."""
        started = time.perf_counter()
        totals = [0, 0, 0, 0, 0]  # read, kept, bytes read, bytes written, reclaimed
        passes = 0
        with self._run_lock:
            cq = self.queues.get(topic, queue_id)
            target = 0 if cq is None else self._flushed_end(cq)
            capacity = max(1, max_offset_map_size // OFFSET_MAP_BYTES_PER_ENTRY)
            while cq is not None:
                seg = self.segments.get((topic, queue_id))
                cleaned = seg.cleaned_offset if seg else cq.min_offset
                if cleaned < target:
                    omap, covered = self._build_map(cq, max(cleaned, cq.min_offset), target, capacity)
                elif seg is not None and 0 <= seg.manifest.oldest_tombstone_ms <= (
                        self.clock.now_ms() - delete_retention_ms):
                    omap, covered = OffsetMap(1), cleaned  # only expired tombstones to remove
                else:
                    break
                counts = self._copy(cq, seg, covered, omap, delete_retention_ms, step)
                totals = [a + b for a, b in zip(totals, counts, strict=True)]
                totals[1] = counts[1]  # kept: what the last pass left, not a sum over passes
                passes += 1
        seg = self.segments.get((topic, queue_id))
        records_read, records_kept, bytes_read, bytes_written, bytes_reclaimed = totals
        return CompactionReport(
            topic, queue_id, passes, seg.cleaned_offset if seg else 0, records_read, records_kept, bytes_read,
            bytes_written, bytes_reclaimed, (time.perf_counter() - started) * 1000,
        )

    def trim(self, topic: str, queue_id: int, below: int, step: StepHook | None = None) -> int:
        """Drop the queue's compacted records below queue offset ``below`` (at most its cleaned
        point): a new generation from there on, switched to as a compaction switches, whose
        start offset (the queue's first) is ``below``. For records kept elsewhere (a tiered
        topic's, once uploaded and past retention.local.ms: docs/tiered-storage.md); a pull
        below the new start is OFFSET_TOO_SMALL. The number of records dropped."""
        with self._run_lock:
            seg = self.segments.get((topic, queue_id))
            below = -1 if seg is None else min(below, seg.cleaned_offset)
            if seg is None or below <= seg.start_offset:
                return 0
            first = seg.first_at(below)
            old = seg.manifest
            switched = False

            def steps(name: str) -> None:
                nonlocal switched
                switched = switched or name == "manifest-switched"  # from here the new files are live
                if step is not None:
                    step(name)

            writer = SegmentWriter(seg.directory, old.generation + 1, steps)
            try:
                for start in range(first, len(seg.entries), _CHUNK):  # a chunk at a time, as a copy pass reads
                    for i, (offset, _pos, _size, tag) in enumerate(seg.entries[start : start + _CHUNK].tolist(), start):
                        writer.add(offset, seg.record(i), tag)
                manifest = replace(old, generation=old.generation + 1, start_offset=below, entry_count=writer.count,
                                   data_bytes=writer.pos)
                writer.commit(manifest)
            except BaseException:
                if not switched:
                    writer.abandon()
                raise
            self.segments[(topic, queue_id)] = Segment(seg.directory, manifest)
            remove_generation(seg.directory, old.generation)
            writer.step("old-generation-removed")
            return first

    def _flushed_end(self, cq: ConsumeQueue) -> int:
        """The queue offset where the unflushed tail begins: entries below it point at
        records that are flushed and dispatched, so recovery never takes them back."""
        safe = self._safe_offset()
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            e = cq.entry(mid)
            if e is not None and e[0] + e[1] > safe:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _dirty(self, cq: ConsumeQueue, start: int, end: int) -> Iterator[_Rec]:
        """The queue's records from ``start`` to ``end`` read through the ConsumeQueue;
        records whose CommitLog file is gone are skipped."""
        for queue_offset, view, tag in self._dirty_entries(cq, start, end):
            yield _Rec(queue_offset, view, tag)

    def _dirty_views(self, cq: ConsumeQueue, start: int, end: int) -> Iterator[tuple[int, memoryview]]:
        for queue_offset, view, _tag in self._dirty_entries(cq, start, end):
            yield queue_offset, view

    def _dirty_entries(self, cq: ConsumeQueue, start: int, end: int) -> Iterator[tuple[int, memoryview, int]]:
        offset = start
        while offset < end:
            entries = cq.read(offset, min(_CHUNK, end - offset))
            if entries is None or not len(entries):
                offset = (offset // cq.per_file + 1) * cq.per_file
                continue
            rows = entries.tolist()
            for k, (phys, _size, tag) in enumerate(rows):
                view = self.commitlog.record_view(phys)
                if view is not None:
                    yield offset + k, view, tag
            offset += len(rows)

    def _build_map(self, cq: ConsumeQueue, start: int, end: int, capacity: int) -> tuple[OffsetMap, int]:
        """The map over dirty records from ``start`` on, and the offset where it stopped
        (``end``, or earlier when the map filled)."""
        omap = OffsetMap(capacity)
        offset = start
        key_hash = self.key_hash
        while offset < end and omap.room:
            stop = min(end, offset + min(_CHUNK, omap.room))
            hashes: list[int] = []
            offsets: list[int] = []
            for queue_offset, view in self._dirty_views(cq, offset, stop):
                key = _key_of(view)
                if key is not None:
                    hashes.append(key_hash(key))
                    offsets.append(queue_offset)
            if hashes:
                omap.add(hashes, offsets)
            offset = stop
        return omap, offset

    def _copy(self, cq: ConsumeQueue, seg: Segment | None, covered: int, omap: OffsetMap,
              delete_retention_ms: int, step: StepHook | None) -> list[int]:
        """Write the next generation: the segment's records and the dirty ones below
        ``covered`` that survive; switch to it; free what it replaces."""
        topic, queue_id = cq.topic, cq.queue_id
        directory = os.path.join(self.root, topic, str(queue_id))
        generation = seg.manifest.generation + 1 if seg else 1
        writer = SegmentWriter(directory, generation, step) if step else SegmentWriter(directory, generation)
        expiry = self.clock.now_ms() - delete_retention_ms
        keys = _KeyReader(cq, self.commitlog, min(omap.capacity, _KEY_CACHE_MAX))
        read = kept = bytes_read = 0
        oldest_tombstone = -1
        try:
            for chunk in _chunks(self._old_and_dirty(cq, seg, covered)):
                latest = omap.lookup([self.key_hash(r.key) if r.key is not None else 0 for r in chunk])
                for r, last in zip(chunk, latest.tolist(), strict=True):
                    read += 1
                    bytes_read += len(r.view)
                    if r.key is not None and (
                            (last > r.offset and keys.key_at(last) == r.key) or (r.tombstone and r.store_ts <= expiry)):
                        continue
                    writer.add(r.offset, r.view, r.tag)
                    kept += 1
                    if r.tombstone and r.key is not None and not 0 <= oldest_tombstone <= r.store_ts:
                        oldest_tombstone = r.store_ts
            start = seg.start_offset if seg else cq.min_offset
            old = seg.manifest if seg else None
            reclaimed = bytes_read - writer.pos
            manifest = Manifest(generation, start, covered, writer.count, writer.pos, self.clock.now_ms(),
                                (old.bytes_reclaimed if old else 0) + reclaimed, (old.runs if old else 0) + 1,
                                oldest_tombstone)
            writer.commit(manifest)
        except BaseException:
            writer.abandon()
            raise
        self.segments[(topic, queue_id)] = Segment(directory, manifest)
        if seg is not None:
            remove_generation(directory, seg.manifest.generation)
            writer.step("old-generation-removed")
        if self._checkpoint():
            writer.step("checkpointed")
            with self._maintenance:
                cq.delete_below_offset(covered)
            writer.step("consume-queue-trimmed")
        return [read, kept, bytes_read, writer.pos, reclaimed]

    def _old_and_dirty(self, cq: ConsumeQueue, seg: Segment | None, covered: int) -> Iterator[_Rec]:
        if seg is not None:
            for first in range(0, len(seg.entries), _CHUNK):  # a chunk at a time: memory stays bounded
                for i, (offset, _pos, _size, tag) in enumerate(seg.entries[first : first + _CHUNK].tolist(), first):
                    yield _Rec(offset, seg.record(i), tag)
        yield from self._dirty(cq, max(seg.cleaned_offset if seg else 0, cq.min_offset), covered)


class _KeyReader:
    """The KEYS of the record at a dirty queue offset, read from the CommitLog (the check
    that a dropped record's key really is the one of the record superseding it)."""

    def __init__(self, cq: ConsumeQueue, commitlog: CommitLog, cache_max: int) -> None:
        self.cq = cq
        self.commitlog = commitlog
        self._cache: dict[int, str | None] = {}
        self._cache_max = max(1, cache_max)

    def key_at(self, offset: int) -> str | None:
        if offset in self._cache:
            return self._cache[offset]
        if len(self._cache) >= self._cache_max:
            self._cache.clear()
        entry = self.cq.entry(offset)
        view = None if entry is None else self.commitlog.record_view(entry[0])
        key = None if view is None else _key_of(view)
        self._cache[offset] = key
        return key


def _chunks(recs: Iterator[_Rec]) -> Iterator[list[_Rec]]:
    chunk: list[_Rec] = []
    for r in recs:
        chunk.append(r)
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _dirty_start_phys(cq: ConsumeQueue, seg: Segment) -> int | None:
    """CommitLog offset of the queue's first record above the cleaned point (None: none)."""
    entry = cq.entry(max(seg.cleaned_offset, cq.min_offset))
    return None if entry is None else entry[0]


def _bytes_between(cq: ConsumeQueue, start: int, end: int) -> int:
    """Record bytes the ConsumeQueue entries [start, end) point at."""
    total = 0
    offset = start
    while offset < end:
        entries = cq.read(offset, end - offset)
        if entries is None or not len(entries):
            offset = (offset // cq.per_file + 1) * cq.per_file
            continue
        total += int(entries["size"].astype(np.int64).sum())
        offset += len(entries)
    return total
