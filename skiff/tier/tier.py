"""A topic's tier: its manifest and its Parquet files in one backend.

`Tier.upload` is the one way data gets in: the file first (named by its queue and
range, so a retry writes the same key), then the manifest listing it. A crash
between the two leaves a file no manifest lists: not data, re-uploaded over by the
next attempt, or removed by `collect_orphans`. Data gets out a row group at a time
(`Tier.row_group`, `Tier.read`, the queries): when the manifest records the file's byte
ranges, its footer (cached in a bounded `FileCache`) and the row groups needed are fetched,
each checked against its SHA-256 in the manifest; a file without ranges is fetched whole,
checked against the manifest's SHA-256 and cached.

A file a manifest stops listing (a compacted topic's rewrite, retention's expiry) is deleted
only ``delete_delay_ms`` after that manifest (the broker's ``tierFileDeleteDelayMs``, as Kafka's
``file.delete.delay.ms`` delays a log segment's deletion): until then the manifest names it as
retired, and a reader that planned from an older manifest (a Spark job, a slave) still reads it.
`Tier.delete_retired`, run by the uploader's passes, deletes the files whose delay has passed.
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.limits import (TIER_CACHE_MAX_BYTES, TIER_COMPACTED_MERGE_MAX_BYTES, TIER_MANIFEST_MAX_BYTES,
                                 TIER_MANIFEST_PART_SEGMENTS, TIER_ROW_GROUP_MESSAGES, TIER_SEGMENT_MAX_MESSAGES)
from skiff.common.properties import split_keys
from skiff.tier.backends import TierBackend, TierError
from skiff.tier.columns import TIER_SCHEMA
from skiff.tier.index import INDEX_SUFFIX, index_bytes, index_file, key_hash, key_index, sorted_index
from skiff.tier.manifest import (ByteRange, Manifest, ManifestError, ManifestPart, Segment, SegmentIndex, broker_prefix,
                                 manifest_file, segment_file)
from skiff.tier.manifest_parts import PART_SUFFIX, parted, read_part
from skiff.tier.ranges import checked_range, file_ranges, footer_file, ranged_file

log = logging.getLogger(__name__)


class TimedOffset(NamedTuple):
    """A queue offset and its message's store time (ms)."""

    offset: int
    store_ms: int


def parquet_bytes(table: pa.Table) -> bytes:
    """A tiered file's bytes: zstd-compressed Parquet in row groups a read decodes alone."""
    sink = io.BytesIO()
    pq.write_table(table.cast(TIER_SCHEMA), sink, compression="zstd", row_group_size=TIER_ROW_GROUP_MESSAGES)
    return sink.getvalue()


class DataFile(NamedTuple):
    """A tiered data file about to be written: its bytes, their SHA-256, and each row group's and
    the footer's byte range (`file_ranges`), all of which its segment records."""

    data: bytes
    sha256: str
    row_groups: tuple[ByteRange, ...]
    footer: ByteRange | None

    def described(self, seg: Segment) -> Segment:
        """``seg`` describing this file (size, checksum, ranges; its other fields as they are)."""
        return replace(seg, size_bytes=len(self.data), sha256=self.sha256, row_groups=self.row_groups,
                       footer=self.footer)


def data_file(table: pa.Table) -> DataFile:
    """The one way a tiered data file is made (an upload's, a compacted rewrite's or merge's)."""
    data = parquet_bytes(table)
    groups, footer = file_ranges(data)
    return DataFile(data, hashlib.sha256(data).hexdigest(), groups, footer)


def checked(seg: Segment | SegmentIndex | ManifestPart, data: bytes) -> bytes:
    """``data`` if it is the file (or index) ``seg`` describes, else `TierError` (a damaged or
    replaced object)."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != seg.sha256 or len(data) != seg.size_bytes:
        raise TierError(f"tier file {seg.file}: checksum {digest[:16]}… ({len(data)} bytes) is not the manifest's "
                        f"{seg.sha256[:16]}… ({seg.size_bytes} bytes): the object is damaged or was replaced")
    return data


def _no_step(step: str) -> None:
    pass


class FileCache:
    """Fetched tier files by name, least recently used out past ``max_bytes`` (thread-safe: a
    broker reads on worker threads)."""

    def __init__(self, max_bytes: int = TIER_CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._files: OrderedDict[str, pq.ParquetFile] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, name: str) -> pq.ParquetFile | None:
        with self._lock:
            f = self._files.get(name)
            if f is None:
                self.misses += 1
                return None
            self.hits += 1
            self._files.move_to_end(name)
            return f

    def put(self, name: str, data: bytes) -> pq.ParquetFile:
        return self.keep(name, pq.ParquetFile(io.BytesIO(data)), len(data))

    def keep(self, name: str, f: pq.ParquetFile, size_bytes: int) -> pq.ParquetFile:
        """Cache ``f`` (a whole file, or a footer alone: `Tier.fetch_footer`) as ``size_bytes``."""
        with self._lock:
            self._files[name] = f
            self._sizes[name] = size_bytes
            while sum(self._sizes.values()) > self.max_bytes and len(self._files) > 1:
                old, _ = self._files.popitem(last=False)
                del self._sizes[old]
        return f

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(self._sizes.values())


class Tier:
    """The tier of every topic in one backend (the backend's keys start with the topic)."""

    def __init__(self, backend: TierBackend, cache: FileCache | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 delete_delay_ms: int = 0, merge_max_bytes: int = TIER_COMPACTED_MERGE_MAX_BYTES,
                 part_segments: int = TIER_MANIFEST_PART_SEGMENTS) -> None:
        if delete_delay_ms < 0:
            raise ValueError(f"a tier's file delete delay is 0 ms or more, not {delete_delay_ms}")
        if merge_max_bytes <= 0:
            raise ValueError(f"a tier's merged file size is more than 0 bytes, not {merge_max_bytes}")
        self.backend = backend
        self.cache = cache or FileCache()
        self.clock = clock
        self.delete_delay_ms = delete_delay_ms
        """How long a file a written manifest stopped listing stays, retired (0: deleted right after
        that manifest; only a writer of the tier, the master's uploader, uses it)."""
        self.merge_max_bytes = merge_max_bytes
        """The size up to which a compacted queue's adjacent files are merged (`merge_groups`;
        tests make it small)."""
        self.part_segments = part_segments
        """Segments per manifest part (`skiff.tier.manifest_parts`; tests make it small)."""
        self._parts: dict[tuple[str, str], dict[str, ManifestPart]] = {}
        """The parts of each manifest last read or written, by file: not fetched again."""
        self.steps: Callable[[str], None] = _no_step
        """Called after each durable step of an upload ("file-written", "index-written",
        "rewrite-written", "parts-written", "manifest-written", "replaced-removed") and of `delete_retired`
        ("retired-deleted", "retired-forgotten"): the crash tests kill the process there."""

    # -- the manifest --------------------------------------------------------------

    def manifest(self, topic: str, broker: str) -> Manifest:
        """The manifest of the topic's part in broker group ``broker`` (empty when nothing was tiered
        yet), with the segments of its parts (each fetched and checked, or known from before:
        a part never changes)."""
        key = manifest_file(topic, broker)
        if not self.backend.exists(key):
            return Manifest(topic, broker)
        data = self.backend.get(key)
        if len(data) > TIER_MANIFEST_MAX_BYTES:
            raise ManifestError(f"{self.backend.url}/{key}: {len(data)} bytes, more than a manifest may be")
        known = self._parts.get((topic, broker), {})

        def load_part(file: str, size_bytes: int, digest: str, count: int) -> ManifestPart:
            part = known.get(file)
            if part is not None and (part.size_bytes, part.sha256, len(part.segments)) == (size_bytes, digest, count):
                return part
            if size_bytes > TIER_MANIFEST_MAX_BYTES:
                raise ManifestError(f"{self.backend.url}/{file}: {size_bytes} bytes, more than a manifest part may be")
            ref = ManifestPart(file, size_bytes, digest, ())
            return replace(ref, segments=read_part(topic, broker, file, checked(ref, self.backend.get(file)), count))

        m = Manifest.from_bytes(data, load_part)
        if (m.topic, m.broker) != (topic, broker):
            raise ManifestError(f"{self.backend.url}/{key} is the manifest of {m.topic!r} in {m.broker!r}")
        self._parts[(topic, broker)] = {p.file: p for p in m.parts}
        return m

    def write_manifest(self, manifest: Manifest) -> Manifest:
        """Write ``manifest`` (its new parts first: `skiff.tier.manifest_parts`); the manifest as
        written, which the writer goes on from. A part it no longer names is retired (deleted
        after the delete delay) or, without a delay, deleted once the manifest is written."""
        done = parted(manifest, self.part_segments)
        for part, data in done.written:
            self.backend.put(part.file, data)
        if done.written:
            self.steps("parts-written")
        written = done.manifest
        if done.dropped and self.delete_delay_ms > 0:
            written = written.retiring_files((p.file for p in done.dropped), self.clock.now_ms())
        self.backend.put(manifest_file(manifest.topic, manifest.broker), written.to_bytes())
        self._parts[(manifest.topic, manifest.broker)] = {p.file: p for p in written.parts}
        if self.delete_delay_ms <= 0:
            self._delete_unlisted(p.file for p in done.dropped)
        return written

    def _delete_unlisted(self, keys: Iterable[str]) -> None:
        """Delete ``keys``, which the manifest just written no longer names (no delete delay). A
        deletion that fails is logged and its key left to `collect_orphans`, not raised: the writer
        must go on from the manifest written, since the one it held before still names the keys
        deleted so far, and its next write would name them again (a missing part makes the whole
        manifest unreadable)."""
        for key in keys:
            try:
                self.backend.delete(key)
            except Exception as exc:  # any backend error: the key is unlisted, an orphan at worst
                log.warning("tier %s: deleting %s, which the manifest no longer names, failed (left for the "
                            "orphan collection): %s", self.backend.url, key, exc)

    # -- writing -------------------------------------------------------------------

    def upload(self, manifest: Manifest, table: pa.Table, compacted: bool = False) -> tuple[Manifest, Segment]:
        """Put one queue's rows (consecutive offsets from the queue's tier end) in a file, then
        in the manifest; the new manifest and segment. Idempotent: the same rows give the same
        key and the same segment.

        ``compacted`` (a compacted topic's rows): the queue's older files holding a key the new rows
        hold lose those rows (`superseded`), so the tier keeps the latest record of each key,
        as the broker's compacted segment does. Each such file is rewritten under a new key, and
        the queue's adjacent small files merged (`rewrite`), before the one manifest that lists
        the new file and the rewritten ones; the files they replace are retired in it
        (`_retire`). A crash before the manifest leaves only unlisted files (collected; the retry
        writes the same keys)."""
        if not table.num_rows:
            raise ValueError("an empty table is not a segment")
        queue_ids = set(table.column("queue_id").to_pylist())
        if len(queue_ids) != 1:
            raise ValueError(f"a segment holds one queue's rows, not queues {sorted(queue_ids)}")
        offsets = table.column("queue_offset").to_pylist()
        times = table.column("store_timestamp").cast(pa.int64()).to_pylist()
        physical = table.column("commit_log_offset").to_pylist()
        queue_id, first, last = queue_ids.pop(), offsets[0], offsets[-1]
        written = data_file(table)
        name = segment_file(manifest.topic, manifest.broker, queue_id, first, last)
        self.backend.put(name, written.data)
        self.steps("file-written")
        keys = index_bytes(key_index(table))
        self.backend.put(index_file(name), keys)
        self.steps("index-written")
        seg = written.described(Segment(
            queue_id, first, last, min(times) // 1000, max(times) // 1000, name, table.num_rows, 0, "",
            SegmentIndex(index_file(name), len(keys), hashlib.sha256(keys).hexdigest()),
            min(physical), max(physical), oldest_tombstone_ms(table) if compacted else None))
        grown = manifest.with_segment(seg)
        if grown is manifest:
            return grown, seg
        replaced = self.rewrite(grown, self.superseded(manifest, seg, table), [queue_id]) if compacted else {}
        return self._replacing(grown, replaced, "replaced (keys superseded by a newer file, or merged)"), seg

    def superseded(self, manifest: Manifest, newer: Segment, table: pa.Table) -> dict[Segment, pa.Table]:
        """The queue's files before ``newer`` that hold a key (the whole KEYS, compaction's key)
        one of ``table``'s rows holds, each with the rows it keeps without them (to `rewrite`). A
        file whose key index has none of the keys is not fetched."""
        keys = pc.unique(table.column("keys").drop_null())
        if not len(keys):
            return {}
        hashes = np.array([key_hash(split_keys(k)[0]) for k in keys.to_pylist() if split_keys(k)], np.int64)
        out: dict[Segment, pa.Table] = {}
        for old in manifest.queue(newer.queue_id):
            if old.first_offset >= newer.first_offset or (
                    old.index is not None and not np.isin(self.key_index(old).column("key_hash").to_numpy(),
                                                          hashes).any()):
                continue
            rows = self.open(old).read()
            drop = pc.fill_null(pc.is_in(rows.column("keys"), value_set=keys), False)
            if pc.any(drop).as_py():
                out[old] = rows.filter(pc.invert(drop))
        return out

    def rewrite(self, manifest: Manifest, kept: Mapping[Segment, pa.Table],
                queue_ids: Iterable[int]) -> dict[Segment, Segment | None]:
        """What a compacted topic's pass changes in the files of ``queue_ids``: each file of
        ``kept`` rewritten with only the rows it keeps, and adjacent small files of the queue
        merged into one (`merge_groups`, as Kafka's log cleaner groups small segments), so a
        queue whose files shrink does not end as ever more small files that each upload fetches.
        The segment replacing each file that goes; None where it goes with no file of its own
        (no row left, or merged into the file listed for its group's first file). A queue's
        newest file is never merged nor dropped: it says where the tier ends."""
        out: dict[Segment, Segment | None] = {}
        for q in sorted(set(queue_ids)):
            segs = manifest.queue(q)
            if not segs:
                continue
            *older, newest = segs
            left = {s: kept[s].num_rows if s in kept else s.rows for s in older}
            for group in merge_groups(older, left, max_bytes=self.merge_max_bytes):
                if len(group) > 1:
                    merged = self._merged(manifest, group, [kept[s] if s in kept else self.open(s).read()
                                                            for s in group])
                    out.update({s: merged if i == 0 else None for i, s in enumerate(group)})
                elif group[0] in kept:
                    out[group[0]] = self._rewritten(manifest, group[0], kept[group[0]])
            out.update({s: None for s in older if not left[s]})  # no row left (the newest says where the tier ends)
            if newest in kept:
                out[newest] = self._rewritten(manifest, newest, kept[newest], keep_empty=True)
        return out

    def expire_tombstones(self, manifest: Manifest, before_ms: int) -> Manifest:
        """``manifest`` (a compacted topic's) without the tombstones stored at or before
        ``before_ms``, as a compaction removes them from a queue past delete.retention.ms: each
        file holding one (its ``tombstoneMs``) rewritten without them, then the manifest, which
        retires the old files. A queue's newest file stays, rows or not: it says where the tier ends."""
        due = [s for s in manifest.segments if s.oldest_tombstone_ms is not None and
               0 <= s.oldest_tombstone_ms <= before_ms]
        if not due:
            return manifest
        kept_rows: dict[Segment, pa.Table] = {}
        for old in due:
            rows = self.open(old).read()
            kept_rows[old] = rows.filter(pc.invert(_tombstones(rows, before_ms)))
        replaced = self.rewrite(manifest, kept_rows, [s.queue_id for s in due])
        return self._replacing(manifest, replaced, "replaced (expired tombstones taken out)")

    def merge(self, manifest: Manifest, queue_ids: Iterable[int]) -> Manifest:
        """``manifest`` (a compacted topic's) with the adjacent small files of each of ``queue_ids``
        merged (`merge_groups`) and the files left with no row dropped, as an upload's or tombstone
        expiry's pass does (`rewrite`): so a queue that stops receiving, or whose files a larger
        ``merge_max_bytes`` now lets join, ends with as few files as a busy one. Decided from the
        manifest alone: unchanged, with nothing fetched or written, when no queue has files to
        merge. The queue's newest file is never merged."""
        due = [q for q in sorted(set(queue_ids)) if self._mergeable(manifest.queue(q)[:-1])]
        if not due:
            return manifest
        return self._replacing(manifest, self.rewrite(manifest, {}, due), "merged with adjacent small files")

    def _mergeable(self, older: Sequence[Segment]) -> bool:
        """Whether a rewrite would change these files (a queue's, all but its newest): two of them
        fit in one file, or one has no row."""
        return any(not s.rows for s in older) or any(
            len(g) > 1 for g in merge_groups(older, {}, max_bytes=self.merge_max_bytes))

    def _replacing(self, manifest: Manifest, replaced: Mapping[Segment, Segment | None], why: str) -> Manifest:
        """``manifest`` with the files a `rewrite` replaced (``replaced``) swapped for their new
        files, written (retiring the old ones) before the old files go (`_retire`): a reader never
        finds a listed file missing, and a crash before the manifest leaves only unlisted files."""
        kept = self.write_manifest(self._retiring(manifest.replacing(replaced), replaced))
        self.steps("manifest-written")
        self._retire(replaced, why)
        return kept

    def learn_tombstones(self, manifest: Manifest, max_files: int) -> Manifest:
        """``manifest`` (a compacted topic's) with up to ``max_files`` of its files whose oldest
        tombstone is not recorded (uploaded before ``tombstoneMs`` existed) given it, from their
        rows (the oldest files first), so `expire_tombstones` takes their tombstones out as it does
        newer files'. Only the manifest is written (the files do not change); unchanged, with
        nothing fetched or written, when every file's is known."""
        unknown = _oldest([s for s in manifest.segments if s.oldest_tombstone_ms is None], max_files)
        if not unknown:
            return manifest
        found: dict[Segment, Segment] = {}
        for seg in unknown:
            rows = self.open(seg).read(columns=["keys", "body", "store_timestamp"])
            found[seg] = replace(seg, oldest_tombstone_ms=oldest_tombstone_ms(rows))
            log.info("tier %s: %s looked at for tombstones (uploaded before they were recorded): %s",
                     self.backend.url, seg.file, found[seg].oldest_tombstone_ms)
        return self.write_manifest(replace(manifest, segments=tuple(found.get(s, s) for s in manifest.segments)))

    def _rewritten(self, manifest: Manifest, old: Segment, rows: pa.Table, keep_empty: bool = False) -> Segment | None:
        """``old``'s range holding only ``rows``: its file and key index written under new keys
        (named by the content's digest); None when no row is left, unless ``keep_empty``."""
        if not rows.num_rows and not keep_empty:
            return None
        return self._written(manifest, old, rows, self._kept_index(old, rows))

    def _merged(self, manifest: Manifest, group: Sequence[Segment], parts: Sequence[pa.Table]) -> Segment:
        """One file for the adjacent files ``group`` (in offset order), holding their rows
        ``parts``: its range is the union of theirs (the gaps between them are offsets compaction
        removed), its times, CommitLog span, oldest tombstone and key index its rows'."""
        index = sorted_index(pa.concat_tables([self._kept_index(s, rows) for s, rows in zip(group, parts)]))
        return self._written(manifest, replace(group[0], last_offset=group[-1].last_offset), pa.concat_tables(parts),
                             index)

    def _kept_index(self, old: Segment, rows: pa.Table) -> pa.Table:
        """The key index of ``rows`` (some of ``old``'s): ``old``'s index without the other rows'
        offsets, the same rows `key_index` would make from ``rows`` without hashing every key again
        (each upload's rewrites and merges pass over the whole compacted history)."""
        index = self.key_index(old)
        offsets = rows.column("queue_offset").to_numpy()
        return index if len(offsets) == old.rows else index.filter(np.isin(index.column("queue_offset").to_numpy(),
                                                                             offsets))

    def _written(self, manifest: Manifest, span: Segment, rows: pa.Table, index: pa.Table) -> Segment:
        """``span``'s range (and, with no row, its times and CommitLog span: nothing narrower is
        known) holding ``rows``, with key index ``index``: the file and its index written under keys
        named by the range and the content's digest, so a listed file is never overwritten and a
        retry writes the same."""
        written = data_file(rows)
        name = segment_file(manifest.topic, manifest.broker, span.queue_id, span.first_offset, span.last_offset,
                            written.sha256[:16])
        self.backend.put(name, written.data)
        keys = index_bytes(index)
        self.backend.put(index_file(name), keys)
        self.steps("rewrite-written")
        seg = written.described(replace(span, file=name, rows=rows.num_rows,
                                        index=SegmentIndex(index_file(name), len(keys),
                                                           hashlib.sha256(keys).hexdigest()),
                                        oldest_tombstone_ms=oldest_tombstone_ms(rows)))
        if not rows.num_rows:
            return seg
        times = rows.column("store_timestamp").cast(pa.int64())
        physical = rows.column("commit_log_offset")
        return replace(seg, first_store_ms=pc.min(times).as_py() // 1000, last_store_ms=pc.max(times).as_py() // 1000,
                       min_commit_log_offset=pc.min(physical).as_py(), max_commit_log_offset=pc.max(physical).as_py())

    def _retiring(self, manifest: Manifest, gone: Iterable[Segment]) -> Manifest:
        """``manifest`` (which no longer lists ``gone``) with their files retired now, to be
        written; unchanged without a delete delay, as `_retire` then deletes them at once."""
        return manifest.retiring(gone, self.clock.now_ms()) if self.delete_delay_ms > 0 else manifest

    def _retire(self, gone: Iterable[Segment], why: str) -> None:
        """After the manifest that stopped listing ``gone`` is written: without a delete delay
        their files (and key indexes) are deleted now (a crash in between, or a deletion that fails,
        leaves unlisted files, collected as orphans); with one the manifest holds them retired
        (`delete_retired`)."""
        gone = list(gone)
        for old in gone:
            log.info("tier %s: %s %s; %s", self.backend.url, old.file, why,
                     f"deleted in {self.delete_delay_ms} ms" if self.delete_delay_ms > 0 else "deleted")
            if self.delete_delay_ms <= 0:
                self._delete_unlisted(old.files())
        if gone and self.delete_delay_ms <= 0:
            self.steps("replaced-removed")

    def delete_retired(self, manifest: Manifest) -> Manifest:
        """``manifest`` without its retired files whose delay has passed, which are deleted first
        (a file already gone is no error: a crash after the deletion and before the manifest just
        deletes it again next time), then the manifest written without them. A key a segment
        lists is never deleted. Unchanged, and nothing written, when none is due."""
        due = manifest.due(self.delete_delay_ms, self.clock.now_ms())
        if not due:
            return manifest
        listed = manifest.listed_files()
        for r in due:
            if r.file not in listed:
                log.info("tier %s: %s deleted (retired at %d, delay %d ms passed)", self.backend.url, r.file,
                         r.retired_ms, self.delete_delay_ms)
                self.backend.delete(r.file)
        self.steps("retired-deleted")
        kept = self.write_manifest(manifest.without_retired(r.file for r in due))
        self.steps("retired-forgotten")
        return kept

    def index_old(self, manifest: Manifest, max_files: int) -> Manifest:
        """``manifest`` with up to ``max_files`` of its files uploaded before key indexes and
        CommitLog spans existed given both (the oldest first), so queries by key and by
        offsetMsgId reach them as they reach newer files. Each index is written before the
        manifest that lists it (a crash leaves an unlisted index, collected as an orphan, and
        the file is indexed again); the data files do not change."""
        old = _oldest([s for s in manifest.segments if s.index is None or s.min_commit_log_offset < 0], max_files)
        if not old:
            return manifest
        done: dict[Segment, Segment] = {}
        for seg in old:
            table = self.open(seg).read(columns=["keys", "msg_id", "queue_offset", "commit_log_offset"])
            keys = index_bytes(key_index(table))
            self.backend.put(index_file(seg.file), keys)
            physical = table.column("commit_log_offset")
            index = SegmentIndex(index_file(seg.file), len(keys), hashlib.sha256(keys).hexdigest())
            done[seg] = replace(seg, index=index, min_commit_log_offset=pc.min(physical).as_py(),
                                max_commit_log_offset=pc.max(physical).as_py())
            log.info("tier %s: %s indexed (uploaded before key indexes)", self.backend.url, seg.file)
        return self.write_manifest(replace(manifest, segments=tuple(done.get(s, s) for s in manifest.segments)))

    def expire(self, manifest: Manifest, before_ms: int) -> tuple[Manifest, list[Segment]]:
        """Drop the files whose newest message was stored before ``before_ms`` (retention.tiered.ms),
        except each queue's newest file, which says where the queue's tier ends. The manifest
        without them (retiring them, with a delete delay) is written first, then the files go
        (`_retire`): a reader never finds a listed file missing."""
        newest = {q: manifest.queue(q)[-1] for q in manifest.queue_ids()}
        gone = [s for s in manifest.segments if s.last_store_ms < before_ms and newest[s.queue_id] != s]
        if not gone:
            return manifest, []
        kept = self.write_manifest(self._retiring(manifest.without(gone), gone))
        self._retire(gone, "expired (retention.tiered.ms)")
        return kept, gone

    def delete(self, manifest: Manifest) -> int:
        """Delete the part of the tier ``manifest`` describes (its topic was deleted): an empty
        manifest first, so no reader opens a file that is going, then the files, then the
        manifest, retired files with the rest (the topic's grace replaces their delay). A crash in
        between leaves unlisted files, which `collect_orphans` removes if the topic comes back.
        The number of files deleted."""
        self.write_manifest(Manifest(manifest.topic, manifest.broker))
        files = sorted(manifest.known_files() | set(self.backend.list(broker_prefix(manifest.topic,
                                                                                                 manifest.broker))))
        for key in files:
            self.backend.delete(key)
        return len(files)

    def collect_orphans(self, manifest: Manifest) -> list[str]:
        """Delete the topic's files the manifest does not account for (uploads a crash cut off
        before their manifest; its retired files are not orphans: `delete_retired` deletes them
        when their delay has passed); the keys deleted."""
        known = manifest.known_files()
        gone = [k for k in self.backend.list(broker_prefix(manifest.topic, manifest.broker))
                if k not in known and k.endswith((".parquet", INDEX_SUFFIX, PART_SUFFIX))]
        for key in gone:
            log.info("tier %s: removing %s, which no manifest lists (an upload cut off before its manifest)",
                     self.backend.url, key)
            self.backend.delete(key)
        return gone

    # -- reading -------------------------------------------------------------------

    def open(self, seg: Segment) -> pq.ParquetFile:
        f = self.cache.get(seg.file)
        if f is None:
            f = self.cache.put(seg.file, checked(seg, self.backend.get(seg.file)))
        return f

    def layout(self, seg: Segment) -> pq.ParquetFile:
        """What tells ``seg``'s row groups apart: its footer alone when the manifest records the
        file's ranges (`fetch_footer`), else the whole file (`open`); fetched unless cached."""
        f = self.cached_layout(seg)
        if f is None:
            f = self.open(seg) if not seg.ranged() else self.keep_footer(seg, self.fetch_footer(seg))
        return f

    def cached_layout(self, seg: Segment) -> pq.ParquetFile | None:
        return self.cache.get(_footer_key(seg) if seg.ranged() else seg.file)

    def fetch_footer(self, seg: Segment) -> pq.ParquetFile:
        """``seg``'s footer, fetched alone and checked against the manifest (not cached: `keep_footer`)."""
        rng = _required(seg.footer, seg)
        data = checked_range(seg, "footer", rng, self.backend.get_range(seg.file, rng.start, rng.length))
        f = footer_file(data)
        if f.num_row_groups != len(seg.row_groups):
            raise TierError(f"tier file {seg.file}: its footer lists {f.num_row_groups} row groups, the manifest "
                            f"{len(seg.row_groups)}")
        return f

    def keep_footer(self, seg: Segment, footer: pq.ParquetFile) -> pq.ParquetFile:
        return self.cache.keep(_footer_key(seg), footer, _required(seg.footer, seg).length)

    def fetch_row_group(self, seg: Segment, footer: pq.ParquetFile, index: int) -> pa.Table:
        """Row group ``index`` of a ranged file, its bytes alone fetched and checked against the
        manifest before they are decoded (with ``footer``, the file's checked footer)."""
        return self.fetch_row_groups(seg, footer, [index]).read_row_group(index)

    def fetch_row_groups(self, seg: Segment, footer: pq.ParquetFile, indexes: Sequence[int]) -> pq.ParquetFile:
        """A ranged file with only row groups ``indexes`` fetched, to read those from: one ranged
        get per run of adjacent row groups (a get is what an object store charges for), each row
        group checked against its SHA-256 in the manifest before any of it is decoded."""
        for index in indexes:
            if not 0 <= index < len(seg.row_groups):
                raise TierError(f"tier file {seg.file} has {len(seg.row_groups)} row groups, not a row group {index}")
        parts = []
        for run in _adjacent_runs(seg.row_groups, sorted(set(indexes))):
            first, last = seg.row_groups[run[0]], seg.row_groups[run[-1]]
            data = self.backend.get_range(seg.file, first.start, last.start + last.length - first.start)
            view = memoryview(data)
            for index in run:
                rng = seg.row_groups[index]
                checked_range(seg, f"row group {index}", rng, view[rng.start - first.start:][:rng.length])
            parts.append((first.start, data))
        return ranged_file(footer.metadata, seg.size_bytes, parts)

    def row_group_index(self, seg: Segment, offset: int) -> int | None:
        """The row group of ``seg``'s file holding ``offset`` or the first offset after it (from
        the file's statistics, in its footer), or None."""
        return next(row_groups_within(self.layout(seg), offset), None)

    def row_group(self, seg: Segment, index: int) -> pa.Table:
        """Row group ``index`` of ``seg``'s file: its range alone when the manifest records ranges."""
        return self._with_row_groups(seg, [index]).read_row_group(index)

    def _with_row_groups(self, seg: Segment, indexes: Sequence[int]) -> pq.ParquetFile:
        """``seg``'s file to read row groups ``indexes`` from: those alone fetched when the
        manifest records ranges, else the whole file (cached)."""
        return self.fetch_row_groups(seg, self.layout(seg), indexes) if seg.ranged() else self.open(seg)

    def read(self, manifest: Manifest, queue_id: int, offset: int, max_count: int) -> pa.Table:
        """Up to ``max_count`` rows of the queue from ``offset`` (the first offset at or after it
        the tier holds), across files; empty when the tier holds nothing from there."""
        parts: list[pa.Table] = []
        left = max_count
        for seg in manifest.queue(queue_id):
            if seg.last_offset < offset:
                continue
            rows = self._rows_from(seg, offset, left)
            parts.append(rows)
            left -= rows.num_rows
            if left <= 0:
                break
        return pa.concat_tables(parts) if parts else TIER_SCHEMA.empty_table()

    def _rows_from(self, seg: Segment, offset: int, max_count: int) -> pa.Table:
        parts, left = [], max_count
        for i in row_groups_within(self.layout(seg), offset):
            group = self.row_group(seg, i)
            offsets = group.column("queue_offset").to_numpy()
            part = group.slice(int((offsets < offset).sum()), left)
            parts.append(part)
            left -= part.num_rows
            if left <= 0:
                break
        return pa.concat_tables(parts) if parts else TIER_SCHEMA.empty_table()

    # -- finding (queries by key, message id and time) -----------------------------

    def key_index(self, seg: Segment) -> pa.Table:
        """The file's key index: fetched (checked, cached with the files), or, for a file
        uploaded before indexes existed, built from the file's own columns."""
        if seg.index is None:
            return key_index(self.open(seg).read(columns=["keys", "msg_id", "queue_offset"]))
        f = self.cache.get(seg.index.file)
        if f is None:
            f = self.cache.put(seg.index.file, checked(seg.index, self.backend.get(seg.index.file)))
        return f.read()

    def rows_where(self, seg: Segment, column: str, values: list[int]) -> pa.Table:
        """The file's rows whose int64 ``column`` (queue_offset, commit_log_offset) is one of
        ``values``, fetching and reading only the row groups whose statistics may hold one."""
        layout = self.layout(seg)
        col = _leaf_index(layout, column)
        wanted = []
        for i in range(layout.num_row_groups):
            stats = layout.metadata.row_group(i).column(col).statistics
            if stats is None or not stats.has_min_max or any(stats.min <= v <= stats.max for v in values):
                wanted.append(i)
        if not wanted:
            return TIER_SCHEMA.empty_table()
        f = self._with_row_groups(seg, wanted)
        want = pa.array(values, pa.int64())
        return pa.concat_tables(group.filter(pc.is_in(group.column(column), want))
                                for group in (f.read_row_group(i) for i in wanted))

    def offset_at_time(self, seg: Segment, timestamp_ms: int) -> TimedOffset | None:
        """The first offset of the file stored at or after ``timestamp_ms`` and its store time
        (None: none is), reading only a row group whose store times reach it (by its statistics),
        and only when the time falls inside the file's range."""
        if timestamp_ms <= seg.first_store_ms:
            return TimedOffset(seg.first_offset, seg.first_store_ms)
        if timestamp_ms > seg.last_store_ms:
            return None
        layout, at_us = self.layout(seg), timestamp_ms * 1000
        col = _leaf_index(layout, "store_timestamp")
        for i in range(layout.num_row_groups):
            stats = layout.metadata.row_group(i).column(col).statistics
            if stats is not None and stats.has_min_max and stats.max_raw < at_us:
                continue
            group = self._with_row_groups(seg, [i]).read_row_group(i, columns=["queue_offset", "store_timestamp"])
            stored = group.column("store_timestamp").cast(pa.int64()).to_numpy()
            late = (stored >= at_us).nonzero()[0]
            if len(late):
                at = int(late[0])
                return TimedOffset(int(group.column("queue_offset")[at].as_py()), int(stored[at]) // 1000)
        return None


def merge_groups(segments: Sequence[Segment], rows_left: Mapping[Segment, int], *,
                 max_bytes: int = TIER_COMPACTED_MERGE_MAX_BYTES,
                 max_rows: int = TIER_SEGMENT_MAX_MESSAGES) -> list[list[Segment]]:
    """Adjacent files of one queue (``segments``, in offset order) that a compacted pass writes
    as one: from the oldest, each file joins the group before it while the group's bytes stay
    within ``max_bytes`` and its rows within ``max_rows``, so after a pass no two adjacent files
    fit together in one (a queue holds at most about twice its bytes over ``max_bytes`` files) and
    a file that already fills its share is left alone. ``rows_left``: the rows each file keeps
    (fewer than its ``rows`` when it is being rewritten: its bytes are counted as that share of
    its size; a file not in it keeps all); files left with no row are in no group (they go).
    Every other file is in exactly one group, in order."""
    groups: list[list[Segment]] = []
    size = rows = 0
    for s in segments:
        left = rows_left.get(s, s.rows)
        if not left:
            continue
        share = s.size_bytes if left == s.rows else s.size_bytes * left // max(s.rows, 1)
        if groups and size + share <= max_bytes and rows + left <= max_rows:
            groups[-1].append(s)
            size, rows = size + share, rows + left
        else:
            groups.append([s])
            size, rows = share, left
    return groups


def _tombstones(rows: pa.Table, before_ms: int | None = None) -> pa.Array:
    """Which rows are tombstones (a key and an empty body: compaction's definition), stored at or
    before ``before_ms`` when given."""
    mask = pc.and_(pc.is_valid(rows.column("keys")), pc.equal(pc.binary_length(rows.column("body")), 0))
    if before_ms is not None:
        stored_ms = pc.divide(rows.column("store_timestamp").cast(pa.int64()), 1000)
        mask = pc.and_(mask, pc.less_equal(stored_ms, before_ms))
    return pc.fill_null(mask, False)


def oldest_tombstone_ms(rows: pa.Table) -> int:
    """The store time (ms) of the oldest tombstone among ``rows``; -1 when there is none."""
    stored_ms = pc.divide(rows.column("store_timestamp").cast(pa.int64()), 1000).filter(_tombstones(rows))
    return -1 if not len(stored_ms) else int(pc.min(stored_ms).as_py())


def row_groups_within(f: pq.ParquetFile, start: int, end: int = 2**63 - 1) -> Iterator[int]:
    """The row groups of a tiered file that may hold queue offsets in ``[start, end)`` (no end:
    from ``start`` on), in order, by their statistics (a row group without statistics may: it is
    read and filtered)."""
    col = _leaf_index(f, "queue_offset")
    for i in range(f.num_row_groups):
        stats = f.metadata.row_group(i).column(col).statistics
        if stats is not None and stats.has_min_max and (stats.max < start or stats.min >= end):
            continue
        yield i


def _oldest(segments: list[Segment], n: int) -> list[Segment]:
    """The ``n`` segments stored first (a manifest's own order is not that once a part of it
    was dissolved: skiff.tier.manifest_parts)."""
    return sorted(segments, key=lambda s: (s.first_store_ms, s.queue_id, s.first_offset))[:n]


def _adjacent_runs(ranges: Sequence[ByteRange], indexes: Sequence[int]) -> list[list[int]]:
    """``indexes`` (ascending) cut where a row group's bytes do not follow the one before's."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][-1] == i - 1 and ranges[i - 1].start + ranges[i - 1].length == ranges[i].start:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _footer_key(seg: Segment) -> str:
    """Where a ranged file's footer is cached (beside whole files, in the same bounded cache)."""
    return f"{seg.file}#footer"


def _required(rng: ByteRange | None, seg: Segment) -> ByteRange:
    if rng is None:
        raise TierError(f"tier file {seg.file}: the manifest records no footer range")
    return rng


def _leaf_index(f: pq.ParquetFile, column: str) -> int:
    """The Parquet column (leaf) index of a top-level primitive column, for its row-group statistics
    (a map column before it has two leaves, so the Arrow field index is not it)."""
    schema = f.metadata.schema
    return next(i for i in range(len(schema)) if schema.column(i).path == column)
