"""A topic's tier manifest: which tiered file holds which offsets of which queue.

One JSON object per topic and broker group, ``<topic>/<broker>/manifest.json`` in the
tier, rewritten whole by the one uploader of the topic in that group (its master) after each file it adds
or removes; a long history's older segments are in parts of their own which it names
(`ManifestPart`, `skiff.tier.manifest_parts`; format 2). It is the tier's only truth: a file the manifest does not list is not
data (an upload that crashed before its manifest, collected by the uploader), and
a reader (a broker serving an old offset, a Spark executor) opens only listed
files, checking each one's SHA-256.

    {"version": 1, "topic": "Orders", "broker": "broker-a",
     "segments": [{"queueId": 0, "firstOffset": 0, "lastOffset": 4095,
                   "firstStoreMs": 1714561200000, "lastStoreMs": 1714561260000,
                   "file": "Orders/broker-a/0/00000000000000000000-00000000000000004095.parquet",
                   "rows": 4096, "bytes": 81234, "sha256": "…"}]}

Offsets of a compacted topic's file have gaps (``rows`` ≤ last − first + 1), and such a file is
replaced (same range, fewer rows, a new key) when a newer file supersedes keys it holds, or
merged with adjacent small files into one covering their ranges (a new key too).

Each segment may also name its key index and the span of CommitLog offsets its records
had (what queries by key and by message id use; segments written before those existed
have neither, and readers do without):

    "index": {"file": "Orders/broker-a/0/…-….keys", "bytes": 9120, "sha256": "…"},
    "commitLogOffsets": [1048576, 5242880]

A compacted topic's file names the store time of its oldest tombstone,
``"tombstoneMs": 1714561230000``, or -1 when it holds none. A file without the field (a
normal topic's, or a compacted one uploaded before the field existed, or by a build that wrote
it only for files holding one) has not been looked at: the uploader reads such files of a
compacted topic a few a pass and records what it found (`Tier.learn_tombstones`).

Files a rewrite replaced or retention expired are not segments any more, but stay in the tier
for the broker's ``tierFileDeleteDelayMs`` after the manifest that dropped them, listed as
retired with the time they were (a reader planned from an older manifest, a Spark job or a
slave, still finds them; `Tier.delete_retired` deletes them once the delay has passed). The
field is absent when nothing is retired, and a manifest without it reads as none:

    "retired": [{"file": "Orders/broker-a/0/…-….parquet", "retiredMs": 1714561290000}]

A segment written by a build that records byte ranges also lists each row group's bytes and the
file's footer (its tail: Thrift metadata, 4-byte length, ``PAR1``), each as
``[start, length, sha256]`` (`ByteRange`), so a reader fetches and checks the row group it needs
and the footer rather than the whole file (`skiff.tier.ranges`); ``sha256`` and ``bytes`` still
describe the whole file, which whole-file readers (Spark, queries, compaction) check:

    "rowGroups": [[4, 4123456, "…"], [4123460, 4120001, "…"]], "footer": [8243461, 21034, "…"]

Both are absent in a file uploaded before they existed (read whole). Readers ignore fields they
do not know, so an older build reads a newer manifest (and a newer build's manifest rewritten by
an older one just loses the ranges: its files are read whole again).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any, NamedTuple

import orjson

from skiff.common.errors import SkiffError
from skiff.common.gc_pause import gc_paused

FORMAT_VERSION = 1
PARTED_FORMAT_VERSION = 2
"""A manifest with parts (`ManifestPart`): builds before parts refuse it as of an unknown format
rather than read a part of the history as all of it."""
MANIFEST_NAME = "manifest.json"


class ManifestError(SkiffError):
    """A manifest that does not parse or does not hold together."""


@dataclass(frozen=True, slots=True)
class SegmentIndex:
    """A tiered file's key index (`skiff.tier.index`): its key, size and SHA-256, checked as the
    file's are."""

    file: str
    size_bytes: int
    sha256: str


class ByteRange(NamedTuple):
    """A run of a tiered file's bytes (a row group's column chunks, or the footer) and its SHA-256,
    so a reader can fetch and check it alone (`skiff.tier.ranges`). A tuple, not a dataclass: a
    long history's manifest holds one per row group (750,000 at 30,000 files), and a frozen
    dataclass took most of a manifest's read to build them."""

    start: int
    length: int
    sha256: str

    def to_json(self) -> list[Any]:
        return [self.start, self.length, self.sha256]

    @classmethod
    def from_json(cls, v: Any) -> ByteRange:
        start, length, digest = v
        start, length = int(start), int(length)
        if start < 0 or length <= 0:
            raise ValueError(f"byte range {v!r} is not a start of 0 or more and a length of 1 or more")
        return cls(start, length, str(digest))


@dataclass(frozen=True, slots=True)
class Segment:
    """One tiered file: a queue's offsets first..last (both included)."""

    queue_id: int
    first_offset: int
    last_offset: int
    first_store_ms: int
    last_store_ms: int
    file: str
    rows: int
    size_bytes: int
    sha256: str
    index: SegmentIndex | None = None
    """The file's key index (`skiff.tier.index`); None in files uploaded before there was one."""
    min_commit_log_offset: int = -1
    max_commit_log_offset: int = -1
    """The CommitLog offsets of the file's records, lowest and highest (-1: not recorded): what
    a message id whose local copy is gone resolves through."""
    oldest_tombstone_ms: int | None = None
    """A compacted topic's file: the store time of its oldest tombstone (a keyed message with an
    empty body; -1: none), so the uploader knows, without fetching, which files hold one that
    has outlived delete.retention.ms (`Tier.expire_tombstones`). None: not known (a normal
    topic's file, or one uploaded before this was recorded: `Tier.learn_tombstones` finds it)."""
    row_groups: tuple[ByteRange, ...] = ()
    """Each row group's byte range in the file, in order (`skiff.tier.ranges.file_ranges`); empty:
    not recorded (a file uploaded before ranges existed), the file is read whole."""
    footer: ByteRange | None = None
    """The file's tail (footer, its length, ``PAR1``); None exactly when ``row_groups`` is empty."""

    def ranged(self) -> bool:
        """Whether a reader may fetch a row group and the footer alone rather than the whole file."""
        return bool(self.row_groups) and self.footer is not None

    def files(self) -> tuple[str, ...]:
        """The keys this segment occupies in the tier: its file and its key index."""
        return (self.file,) if self.index is None else (self.file, self.index.file)

    def holds_commit_log_offset(self, offset: int) -> bool:
        return self.min_commit_log_offset <= offset <= self.max_commit_log_offset and self.min_commit_log_offset >= 0

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "queueId": self.queue_id, "firstOffset": self.first_offset, "lastOffset": self.last_offset,
            "firstStoreMs": self.first_store_ms, "lastStoreMs": self.last_store_ms, "file": self.file,
            "rows": self.rows, "bytes": self.size_bytes, "sha256": self.sha256}
        if self.index is not None:
            d["index"] = {"file": self.index.file, "bytes": self.index.size_bytes, "sha256": self.index.sha256}
        if self.min_commit_log_offset >= 0:
            d["commitLogOffsets"] = [self.min_commit_log_offset, self.max_commit_log_offset]
        if self.oldest_tombstone_ms is not None:
            d["tombstoneMs"] = self.oldest_tombstone_ms
        if self.ranged() and self.footer is not None:
            d["rowGroups"] = [r.to_json() for r in self.row_groups]
            d["footer"] = self.footer.to_json()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Segment:
        try:
            idx = d.get("index")
            index = None if idx is None else SegmentIndex(str(idx["file"]), int(idx["bytes"]), str(idx["sha256"]))
            low, high = (int(v) for v in d.get("commitLogOffsets", (-1, -1)))
            groups = tuple(ByteRange.from_json(r) for r in d.get("rowGroups", ()))
            footer = None if d.get("footer") is None else ByteRange.from_json(d["footer"])
            if (not groups) != (footer is None):
                raise ValueError("rowGroups and footer go together")
            return cls(int(d["queueId"]), int(d["firstOffset"]), int(d["lastOffset"]), int(d["firstStoreMs"]),
                       int(d["lastStoreMs"]), str(d["file"]), int(d["rows"]), int(d["bytes"]), str(d["sha256"]),
                       index, low, high, None if d.get("tombstoneMs") is None else int(d["tombstoneMs"]), groups, footer)
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"manifest segment {dict(d)!r}: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class RetiredFile:
    """A file (data or key index) a written manifest no longer lists as a segment's, and when it
    stopped (ms): it is deleted once the broker's ``tierFileDeleteDelayMs`` has passed since, so a
    reader holding an older manifest still finds it. Never read through this manifest."""

    file: str
    retired_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "retiredMs": self.retired_ms}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RetiredFile:
        try:
            return cls(str(d["file"]), int(d["retiredMs"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"manifest retired file {d!r}: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class ManifestPart:
    """Segments written out of the manifest into an object of their own (`skiff.tier.manifest_parts`),
    which the manifest names with its size and SHA-256: the manifest a writer rewrites after each
    file stays small however long the history, and a part, named by its digest, never changes."""

    file: str
    size_bytes: int
    sha256: str
    segments: tuple[Segment, ...]

    def ref_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.size_bytes, "sha256": self.sha256, "segments": len(self.segments)}


def _first_offset(s: Segment) -> int:
    return s.first_offset


def _last_offset(s: Segment) -> int:
    return s.last_offset


PartLoader = Callable[[str, int, str, int], ManifestPart]
"""Fetches a part named by a manifest (its file, bytes, SHA-256 and segment count), checked."""


@dataclass(frozen=True, slots=True)
class Manifest:
    topic: str
    broker: str = ""
    segments: tuple[Segment, ...] = field(default=())
    retired: tuple[RetiredFile, ...] = field(default=())
    """Files no segment names any more, waiting out the delete delay (not data to this manifest's
    readers: offsets, queries and Spark's planning look only at ``segments``)."""
    parts: tuple[ManifestPart, ...] = field(default=())
    """Which of ``segments`` are written in parts of their own (every segment is in ``segments``,
    read back from its part: readers see one list). A part whose segments are not all still
    listed is dissolved when the manifest is next written (`skiff.tier.manifest_parts.parted`)."""

    _queues: dict[int, tuple[Segment, ...]] | None = field(default=None, init=False, repr=False, compare=False)
    """Each queue's segments in offset order, sorted once per manifest (it never changes): a
    pull through the tier looks its queue up every time, and sorting 30,000 segments took 3 ms."""

    def _by_queue(self) -> dict[int, tuple[Segment, ...]]:
        if self._queues is None:  # two threads may both sort: the same result
            grouped: dict[int, list[Segment]] = {}
            for s in self.segments:
                grouped.setdefault(s.queue_id, []).append(s)
            object.__setattr__(self, "_queues", {q: tuple(sorted(segs, key=_first_offset))
                                                 for q, segs in grouped.items()})
        assert self._queues is not None
        return self._queues

    def queue(self, queue_id: int) -> list[Segment]:
        """The queue's segments, in offset order."""
        return list(self._by_queue().get(queue_id, ()))

    def queue_ids(self) -> list[int]:
        return sorted(self._by_queue())

    def end_offset(self, queue_id: int) -> int:
        """The first offset of the queue not in the tier (0 when none is)."""
        segs = self._by_queue().get(queue_id)
        return segs[-1].last_offset + 1 if segs else 0

    def first_offset(self, queue_id: int) -> int | None:
        segs = self._by_queue().get(queue_id)
        return segs[0].first_offset if segs else None

    def covering(self, queue_id: int, offset: int) -> Segment | None:
        """The segment holding ``offset``, or the first one after it (a compacted gap), or None."""
        segs = self._by_queue().get(queue_id, ())
        at = bisect_left(segs, offset, key=_last_offset)  # the files of a queue never overlap
        return segs[at] if at < len(segs) else None

    def overlapping(self, queue_id: int, first: int, end: int) -> list[Segment]:
        """Segments with offsets in [first, end)."""
        segs = self._by_queue().get(queue_id, ())
        return list(takewhile(lambda s: s.first_offset < end, segs[bisect_left(segs, first, key=_last_offset):]))

    def with_segment(self, seg: Segment) -> Manifest:
        """This manifest plus ``seg``, which must start at or after where its queue ends (a gap
        is offsets compaction removed, or messages gone before the topic was tiered); an
        idempotent re-add of the same segment is a no-op."""
        if any(s == seg for s in self.segments if s.file == seg.file):  # names first: 30,000 segments
            return self
        end = self.end_offset(seg.queue_id)
        if seg.first_offset < end:
            raise ManifestError(f"{self.topic} queue {seg.queue_id}: segment from {seg.first_offset} overlaps "
                                f"the tier, which holds offsets up to {end - 1}")
        return replace(self, segments=self.segments + (seg,))

    def replacing(self, changes: Mapping[Segment, Segment | None]) -> Manifest:
        """This manifest with each segment in ``changes`` replaced by its value (a file of the same
        range rewritten with fewer rows), or dropped where the value is None."""
        kept = (changes[s] if s in changes else s for s in self.segments)
        return replace(self, segments=tuple(s for s in kept if s is not None))

    def without(self, gone: Iterable[Segment]) -> Manifest:
        drop = set(gone)
        return replace(self, segments=tuple(s for s in self.segments if s not in drop))

    def listed_files(self) -> set[str]:
        """The keys of every segment's file and key index, and of the manifest's parts: what
        readers of this manifest open."""
        return {f for s in self.segments for f in s.files()} | {p.file for p in self.parts}

    def known_files(self) -> set[str]:
        """Every key this manifest accounts for, segments' and retired: anything else under its
        prefix is an orphan (an upload cut off before its manifest)."""
        return self.listed_files() | {r.file for r in self.retired}

    def retiring(self, gone: Iterable[Segment], now_ms: int) -> Manifest:
        """This manifest with the files of ``gone`` (segments it no longer lists) retired at
        ``now_ms``; a file already retired keeps its first time, a file a segment lists is not
        retired (a rewrite never reuses a key, but a listed file must never be deleted)."""
        return self.retiring_files((f for s in gone for f in s.files()), now_ms)

    def retiring_files(self, files: Iterable[str], now_ms: int) -> Manifest:
        """This manifest with ``files`` (keys it no longer lists: segments' files, parts) retired at
        ``now_ms``, on the same terms as `retiring`."""
        known, listed = {r.file for r in self.retired}, self.listed_files()
        new = tuple(RetiredFile(f, now_ms) for f in dict.fromkeys(files) if f not in known and f not in listed)
        return replace(self, retired=self.retired + new) if new else self

    def due(self, delay_ms: int, now_ms: int) -> list[RetiredFile]:
        """The retired files whose delay has passed by ``now_ms``."""
        return [r for r in self.retired if now_ms - r.retired_ms >= delay_ms]

    def without_retired(self, files: Iterable[str]) -> Manifest:
        drop = set(files)
        return replace(self, retired=tuple(r for r in self.retired if r.file not in drop))

    def remote_bytes(self, queue_id: int | None = None) -> int:
        return sum(s.size_bytes for s in self.segments if queue_id is None or s.queue_id == queue_id)

    def to_bytes(self) -> bytes:
        """The manifest's JSON: format 1 when it has no parts (what builds before parts read),
        else format 2, its parts named and only the segments outside them listed."""
        in_parts = {id(s) for p in self.parts for s in p.segments}  # the same objects (manifest_parts)
        if len(in_parts) != sum(len(p.segments) for p in self.parts) or \
                not in_parts <= {id(s) for s in self.segments}:
            raise ValueError(f"{self.topic}: a manifest's parts hold segments it does not list, or one twice")
        body: dict[str, Any] = {"version": PARTED_FORMAT_VERSION if self.parts else FORMAT_VERSION,
                                "topic": self.topic, "broker": self.broker,
                                "segments": [s.to_json() for s in self.segments if id(s) not in in_parts]}
        if self.parts:
            body["parts"] = [p.ref_json() for p in self.parts]
        if self.retired:
            body["retired"] = [r.to_json() for r in self.retired]
        return orjson.dumps(body)

    @classmethod
    def from_bytes(cls, data: bytes, load_part: PartLoader | None = None) -> Manifest:
        """The manifest ``data`` holds; a manifest with parts needs ``load_part`` to fetch them
        (`Tier.manifest`), and its segments are the parts' in order, then its own. The collector
        is paused while the segments are built (`skiff.common.gc_pause`), not while parts are
        fetched: the pause is process-wide."""
        with gc_paused():
            try:
                d = orjson.loads(data)
            except ValueError as exc:
                raise ManifestError(f"manifest is not JSON: {exc}") from None
            version = d.get("version") if isinstance(d, dict) else None
            if version not in (FORMAT_VERSION, PARTED_FORMAT_VERSION) or not isinstance(d.get("segments"), list):
                raise ManifestError(f"manifest of an unknown format (version {version!r}, this build reads "
                                    f"{FORMAT_VERSION} and {PARTED_FORMAT_VERSION})")
            retired, refs = d.get("retired", []), d.get("parts", [])
            if not isinstance(retired, list) or not isinstance(refs, list):
                raise ManifestError(f"manifest's retired files or parts are not lists: {retired!r}, {refs!r}")
            own = tuple(Segment.from_json(s) for s in d["segments"])
            gone = tuple(RetiredFile.from_json(r) for r in retired)
        if refs and load_part is None:
            raise ManifestError("the manifest lists parts of its own: read it through its tier (Tier.manifest)")
        parts = tuple(_part(ref, load_part) for ref in refs) if load_part is not None else ()
        return cls(str(d.get("topic", "")), str(d.get("broker", "")),
                   tuple(s for p in parts for s in p.segments) + own, gone, parts)


def _part(ref: Any, load_part: PartLoader) -> ManifestPart:
    try:
        file, size, digest, count = str(ref["file"]), int(ref["bytes"]), str(ref["sha256"]), int(ref["segments"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"manifest part {ref!r}: {exc!r}") from None
    return load_part(file, size, digest, count)


def broker_prefix(topic: str, broker: str) -> str:
    """Where one broker group's part of a topic lives: topic first, so that a topic's whole
    history is one directory for ``spark.read.parquet``."""
    return f"{topic}/{broker}/"


def segment_file(topic: str, broker: str, queue_id: int, first: int, last: int, version: str = "") -> str:
    """Where a segment's file goes: named by its range, so a retried upload writes the same key.
    A compacted topic's file rewritten without superseded rows or merged (`Tier.rewrite`) adds ``version``
    (its content's digest): a new key, so the file the manifest lists is never overwritten."""
    return f"{broker_prefix(topic, broker)}{queue_id}/{first:020d}-{last:020d}{'.' + version if version else ''}.parquet"


def manifest_file(topic: str, broker: str) -> str:
    return f"{broker_prefix(topic, broker)}{MANIFEST_NAME}"
