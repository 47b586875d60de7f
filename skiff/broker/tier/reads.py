"""Pulls of offsets that are only in the tier.

The pull operation asks the store first; when the store answers OFFSET_TOO_SMALL (the
offset is below what is kept locally) and the topic's manifest has the offset, the
answer comes from the tier: rows of the file that holds it, rebuilt into stored
records (`skiff.tier.columns.rows_to_records`), so every door and client reads them as
it reads the CommitLog. The tag and SQL92 filters of the pull apply to them as to local
records.

Fetching a file is network I/O and the pull runs on the event loop, so a file that is
not in the cache is fetched on a worker thread and the pull answered "retry at once"
(MESSAGE_WAS_REMOVING → PULL_RETRY_IMMEDIATELY, same offset); the retry finds it
cached. At most one fetch per file runs at a time.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from skiff.broker.operations.pull import PullRequest
from skiff.broker.operations.subscription import record_filter
from skiff.broker.tier.uploader import TierUploader
from skiff.common.hashing import tag_hash
from skiff.common.record import read_head
from skiff.filter import MessageFilter
from skiff.store import GetResult
from skiff.store.results import GetStatus
from skiff.tier.columns import rows_to_records
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier

log = logging.getLogger(__name__)

FETCH_THREADS = 2
"""Files fetched at once for reads through the tier."""


class TierReads:
    def __init__(self, tier: Tier, uploader: TierUploader) -> None:
        self.tier = tier
        self.uploader = uploader
        self._pool = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="skiff-tier-fetch")
        self._fetching: dict[str, Future[object]] = {}
        self._manifests: dict[str, Manifest] = {}
        """Manifests read for pulls where this broker does not upload (a slave): read once."""
        self._lock = threading.Lock()
        self.served = 0
        self.fetch_errors = 0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def read(self, req: PullRequest, flt: MessageFilter, local: GetResult) -> GetResult:
        """The tier's answer to a pull the store answered OFFSET_TOO_SMALL (``local``), or ``local``."""
        if not self.uploader.is_tiered(req.topic):
            return local
        m = self.uploader.manifests.get(req.topic) or self._manifests.get(req.topic)
        if m is None:
            self._start(req.topic, None)
            return _retry(req, local)
        seg = m.covering(req.queue_id, req.offset)
        if seg is None or seg.first_offset >= local.min_offset:
            return local
        first = m.first_offset(req.queue_id)
        low = local.min_offset if first is None else min(first, local.min_offset)
        if self.tier.cache.get(seg.file) is None:
            self._start(req.topic, seg)
            return GetResult(GetStatus.MESSAGE_WAS_REMOVING, req.offset, low, local.max_offset)
        table = self.tier.read(m, req.queue_id, req.offset, min(req.max_count, seg.last_offset - req.offset + 1)
                               if req.offset >= seg.first_offset else req.max_count)
        if not table.num_rows:
            return local
        offsets = table.column("queue_offset").to_pylist()
        table = _filtered(table, flt)
        records = rows_to_records(table)
        self.served += table.num_rows
        if not table.num_rows:  # the whole run was filtered out: move past it
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, offsets[-1] + 1, low, local.max_offset)
        return GetResult(GetStatus.FOUND, offsets[-1] + 1, low, local.max_offset, [memoryview(records)],
                         table.num_rows, len(records), table.column("queue_offset").to_pylist())

    def _start(self, topic: str, seg: Segment | None) -> None:
        """Fetch a file (or, with no segment, the topic's manifest) in the background, once."""
        key = seg.file if seg is not None else f"{topic}/manifest"
        with self._lock:
            if key in self._fetching:
                return
            self._fetching[key] = self._pool.submit(self._fetch, topic, seg, key)

    def _fetch(self, topic: str, seg: Segment | None, key: str) -> object:
        try:
            if seg is not None:
                return self.tier.open(seg)
            m = self._manifests[topic] = self.tier.manifest(topic)  # read only: orphans are the uploader's
            return m
        except Exception as exc:
            self.fetch_errors += 1
            log.error("tier: fetching %s failed: %s", key, exc)
            return None
        finally:
            with self._lock:
                self._fetching.pop(key, None)


def _retry(req: PullRequest, local: GetResult) -> GetResult:
    return GetResult(GetStatus.MESSAGE_WAS_REMOVING, req.offset, local.min_offset, local.max_offset)


def _filtered(table: pa.Table, flt: MessageFilter) -> pa.Table:
    """The rows the pull's filter keeps: tag codes as the ConsumeQueue's, then SQL92 on the record."""
    codes = flt.tag_codes
    if codes is not None:
        hashes = np.array([tag_hash(t) for t in table.column("tags").to_pylist()], np.int64)
        table = table.filter(pa.array(np.isin(hashes, np.array(sorted(codes), np.int64))))
    test = record_filter(flt)
    if test is not None and table.num_rows:
        records = rows_to_records(table)
        keep, pos = [], 0
        for _ in range(table.num_rows):
            size = read_head(records, pos).total_size
            keep.append(test(memoryview(records)[pos:pos + size]))
            pos += size
        table = table.filter(pa.array(keep))
    return table

