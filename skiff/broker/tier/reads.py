"""Pulls of offsets that are only in the tier.

The pull operation asks the store first; when the store answers OFFSET_TOO_SMALL (the
offset is below what is kept locally), or says the offset's CommitLog or ConsumeQueue file went
(MESSAGE_WAS_REMOVING, OFFSET_FOUND_NULL: retention deletes ahead of the queue's minimum), and
the topic's manifest has the offset, the
answer comes from the tier: the row group of the file that holds it, rebuilt into stored
records (`skiff.tier.columns.rebuild`), so every door and client reads them
as it reads the CommitLog. The pull's tag and SQL92 filters apply to them as to local
records. An answer stops at the end of its row group; the client pulls on from there.

Fetching a file and rebuilding a row group are slow next to a pull, and a pull runs on
the event loop: both happen on worker threads. A pull whose row group is not ready starts
that work (at most once per file or row group at a time) and is answered "retry at once"
(MESSAGE_WAS_REMOVING → PULL_RETRY_IMMEDIATELY, same offset); the queues that asked are
remembered with the work (`waiting`), and told when it ends (`ready_listeners`), so a door can
hold such a pull and answer it then rather than have its client pull again at once, hundreds of
times a first read (the remoting pull and gRPC PullMessage do: skiff.broker.processors.pull,
skiff.broker.grpc.offsets), or wait out its whole wait time (a Kafka Fetch: skiff.broker.kafka.fetch). For a file not fetched yet it is
one job: the fetch, and the row group the pull asked for rebuilt while the file's SHA-256 is
checked (`TierReads._open`); nothing is cached or served before the checksum matched. When the
manifest records the file's byte ranges (files uploaded since it does), that job fetches the
file's footer and the row group alone (two ranged gets, each checked against its own SHA-256 in
the manifest), and each later row group is one ranged get (`skiff.tier.ranges`); files without
ranges are fetched whole as before. Rebuilt row groups are kept
in a cache bounded by bytes (`TIER_CACHE_MAX_BYTES`, least recently used out), so a
consumer reading a tiered queue from its start has each row group rebuilt once and then
served as slices of one buffer, as the CommitLog is.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skiff.broker.operations.pull import PullRequest
from skiff.broker.operations.subscription import record_filter
from skiff.broker.tier.uploader import TierUploader
from skiff.common.hashing import tag_hash
from skiff.common.limits import TIER_CACHE_MAX_BYTES
from skiff.filter import MessageFilter
from skiff.store import GetResult
from skiff.store.results import GetStatus
from skiff.tier.columns import rebuild
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier, checked, row_groups_within

log = logging.getLogger(__name__)

FETCH_THREADS = 2
"""Files fetched and row groups rebuilt at once for reads through the tier."""


class RecordRun(NamedTuple):
    """A row group rebuilt: its records back to back, where each ends, their offsets and tag codes."""

    offsets: np.ndarray
    ends: np.ndarray
    records: bytes
    tag_codes: np.ndarray

    def starts(self) -> np.ndarray:
        return np.concatenate(([0], self.ends[:-1]))


def rebuilt_run(table: pa.Table) -> RecordRun:
    """A row group's run, its records rebuilt column-wise (`rebuild`, one buffer, no object per
    row) and its tag codes computed once per distinct TAGS value (a run holds a few)."""
    rebuilt = rebuild(table)
    tags = table.column("tags").combine_chunks().dictionary_encode()
    codes = np.array([tag_hash(t) for t in tags.dictionary.to_pylist()] + [tag_hash(None)], np.int64)
    index = tags.indices.fill_null(len(tags.dictionary)).to_numpy(zero_copy_only=False)
    return RecordRun(table.column("queue_offset").to_numpy().astype(np.int64), rebuilt.ends, rebuilt.records,
                     codes[index])


class RunCache:
    """Rebuilt row groups by (file, index), least recently used out past ``max_bytes`` (thread-safe)."""

    def __init__(self, max_bytes: int = TIER_CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[tuple[str, int], RecordRun] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int]) -> RecordRun | None:
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._runs.move_to_end(key)
            return run

    def put(self, key: tuple[str, int], run: RecordRun) -> None:
        with self._lock:
            if key in self._runs:
                return
            self._runs[key] = run
            self._bytes += len(run.records)
            while self._bytes > self.max_bytes and len(self._runs) > 1:
                _, old = self._runs.popitem(last=False)
                self._bytes -= len(old.records)


class TierReads:
    def __init__(self, tier: Tier, uploader: TierUploader) -> None:
        self.tier = tier
        self.uploader = uploader
        self.runs = RunCache()
        self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="skiff-tier-fetch")
        self._checks = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="skiff-tier-check")
        """SHA-256 checks of fetched files, one per fetch at most (so never waiting on each other)."""
        self._pending: dict[object, Future[None]] = {}
        self._waiters: dict[object, set[tuple[str, int]]] = {}
        """The queues whose pulls were told to retry, by the work they wait for."""
        self.ready_listeners: list[Callable[[list[tuple[str, int]]], None]] = []
        """Each told (on a worker thread) the queues whose work ended, done or failed: their pulls
        may be read again (the remoting door's held pulls, the Kafka listener's held fetches)."""
        self._manifests: dict[str, Manifest] = {}
        """Manifests read for pulls where this broker does not upload (a slave): read once."""
        self._lock = threading.Lock()
        self.served = 0
        self.fetch_errors = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._checks.shutdown(wait=False, cancel_futures=True)

    def read(self, req: PullRequest, flt: MessageFilter, local: GetResult) -> GetResult:
        """The tier's answer to a pull whose offset the store no longer has (``local``: one of
        `GONE_LOCALLY`), or ``local``. Below the queue's minimum (OFFSET_TOO_SMALL) the tier serves
        the files wholly below it; where the CommitLog or ConsumeQueue file of the offset went while
        the minimum still includes it, the offset itself is gone, so the tier serves from it on."""
        if not self.uploader.is_tiered(req.topic):
            return local
        m = self.uploader.manifests.get(req.topic) or self._manifests.get(req.topic)
        if m is None:
            self._start(("manifest", req.topic), req, self._load_manifest, req.topic)
            return _retry(req, local, local.min_offset)
        seg = m.covering(req.queue_id, req.offset)
        gone_below = local.min_offset if local.status is GetStatus.OFFSET_TOO_SMALL else req.offset + 1
        if seg is None or seg.first_offset >= gone_below:
            return local
        first = m.first_offset(req.queue_id)
        low = local.min_offset if first is None else min(first, local.min_offset)
        if not seg.rows:  # a compacted topic's file whose every row went (superseded, expired tombstones)
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, seg.last_offset + 1, low, local.max_offset)
        if self.tier.cached_layout(seg) is None:
            self._start(seg.file, req, self._open, seg, req.offset)
            return _retry(req, local, low)
        index = self.tier.row_group_index(seg, req.offset)
        if index is None:  # a gap at the end of a compacted topic's file: on to the next file
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, seg.last_offset + 1, low, local.max_offset)
        run = self.runs.get((seg.file, index))
        if run is None:
            self._start((seg.file, index), req, self._rebuild, seg, index)
            return _retry(req, local, low)
        return self._answer(run, req, flt, low, local.max_offset)

    def _answer(self, run: RecordRun, req: PullRequest, flt: MessageFilter, low: int, high: int) -> GetResult:
        i = int(np.searchsorted(run.offsets, req.offset))
        j = min(len(run.offsets), i + max(1, req.max_count))
        if i >= j:
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, req.offset + 1, low, high)
        starts = run.starts()
        keep = np.arange(i, j)
        if flt.tag_codes is not None:
            keep = keep[np.isin(run.tag_codes[i:j], np.array(sorted(flt.tag_codes), np.int64))]
        test = record_filter(flt)
        view = memoryview(run.records)
        if test is not None:
            keep = np.array([k for k in keep.tolist() if test(view[starts[k]:run.ends[k]])], np.int64)
        next_offset = int(run.offsets[j - 1]) + 1
        if not len(keep):
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, next_offset, low, high)
        if len(keep) == j - i:
            buffers = [view[int(starts[i]):int(run.ends[j - 1])]]
        else:
            buffers = [view[int(starts[k]):int(run.ends[k])] for k in keep.tolist()]
        self.served += len(keep)
        return GetResult(GetStatus.FOUND, next_offset, low, high, buffers, len(keep),
                         sum(len(b) for b in buffers), run.offsets[keep].tolist())

    def manifest_kept(self, topic: str) -> Manifest | None:
        return self._manifests.get(topic)

    def keep_manifest(self, m: Manifest) -> None:
        self._manifests[m.topic] = m

    def _load_manifest(self, topic: str) -> None:
        self._manifests[topic] = self.tier.manifest(topic, self.uploader.broker_name)  # read only

    def _open(self, seg: Segment, offset: int) -> None:
        """Fetch ``seg``'s file and rebuild the row group holding ``offset``, the one a pull waits
        for, in one job (no second retry round for the row group). The file's SHA-256 (of the
        whole file: the manifest's rule) is checked on another thread while the row group is
        decoded and rebuilt (hashlib, pyarrow and the rebuild kernel let go of the GIL), and
        nothing is cached, hence served, before it matched: a damaged file fails with the
        checksum's error, whatever the decoder made of it. The run is cached before the file, so a
        pull in between finds the file still pending rather than starting the rebuild again.

        A file whose segment records its ranges (`Segment.ranged`) is not fetched whole: its footer
        and that row group's bytes are, each checked against the manifest's SHA-256 before it is
        decoded (`_open_ranged`)."""
        if seg.ranged():
            self._open_ranged(seg, offset)
            return
        data = self.tier.backend.get(seg.file)
        check = self._checks.submit(checked, seg, data)
        try:
            f = pq.ParquetFile(pa.BufferReader(data))
            index = next(row_groups_within(f, offset), None)
            run = None if index is None else rebuilt_run(f.read_row_group(index))
        finally:
            check.result()  # raises the checksum's error, which then replaces the decoder's
        if index is not None and run is not None:
            self.runs.put((seg.file, index), run)
        self.tier.cache.put(seg.file, data)

    def _open_ranged(self, seg: Segment, offset: int) -> None:
        """The first read of a ranged file: its footer, then the row group holding ``offset``, two
        ranged gets, each checked before use; the run is cached before the footer (as `_open`)."""
        footer = self.tier.fetch_footer(seg)
        index = next(row_groups_within(footer, offset), None)
        if index is not None and self.runs.get((seg.file, index)) is None:
            self.runs.put((seg.file, index), rebuilt_run(self.tier.fetch_row_group(seg, footer, index)))
        self.tier.keep_footer(seg, footer)

    def _rebuild(self, seg: Segment, index: int) -> None:
        self.runs.put((seg.file, index), rebuilt_run(self.tier.row_group(seg, index)))

    def waiting(self, topic: str, queue_id: int) -> bool:
        """Whether a pull of the queue was told to retry and its work has not ended yet."""
        queue = (topic, queue_id)
        with self._lock:
            return any(queue in queues for queues in self._waiters.values())

    def _start(self, key: object, req: PullRequest, work: Callable[..., Any], *args: Any) -> None:
        """Run ``work(*args)`` on a worker thread unless the same work is already running; the
        pull's queue is told when it ends."""
        with self._lock:
            self._waiters.setdefault(key, set()).add((req.topic, req.queue_id))
            if key in self._pending:
                return
            self._pending[key] = self._pool.submit(self._run, key, work, *args)

    def _run(self, key: object, work: Callable[..., Any], *args: Any) -> None:
        try:
            work(*args)
        except Exception as exc:
            self.fetch_errors += 1
            log.error("tier: %s failed: %s", key, exc)
        finally:
            with self._lock:
                self._pending.pop(key, None)
                queues = self._waiters.pop(key, set())
            if queues:
                for listener in self.ready_listeners:
                    listener(sorted(queues))


def _retry(req: PullRequest, local: GetResult, low: int) -> GetResult:
    return GetResult(GetStatus.MESSAGE_WAS_REMOVING, req.offset, low, local.max_offset)
