"""The uploader: sealed messages of tiered topics, per queue and offset range, to the tier.

Every ``tierUploadIntervalMs`` the master's uploader looks at each queue of each topic
with ``tiered.storage=true``: from where the tier's manifest ends (or the queue's local
minimum, if messages went before the topic was tiered) up to the sealed end (messages
flushed and older than ``tierSealMs``), it reads the records from the store, makes them
a table (`skiff.tier.columns`), and `Tier.upload` puts the file and then the manifest.
It runs on a worker thread, reading the CommitLog as consumers do: appends never wait
for it. A compacted topic's queue is uploaded only up to its cleaned point, and read there as
a consumer reads it, from its compacted segment: the tier holds the latest record of each key
of the queue's uploaded history, at its offset (gaps where compaction removed records; an older
file holding a key a new file holds is rewritten without it, and adjacent small files are merged,
`Tier.upload`), and the compacted
segment's uploaded records are trimmed from the disk once old enough, as a normal topic's
CommitLog files are deleted.

Only this object writes a topic's manifest, and it keeps the last one it wrote (one
read from the tier when a topic is first seen, after which files no manifest lists
are removed: uploads a crash cut off). A new master starts from the manifest in the
tier, so it continues where the old one stopped. Files uploaded before key indexes and
CommitLog spans existed get both, a few files a pass (`Tier.index_old`), so queries by key
and message id reach them; a compacted topic's files uploaded before their oldest tombstone
was recorded get it the same way (`Tier.learn_tombstones`), so their tombstones expire too. A
compacted queue's small adjacent files are merged in every pass, whether or not it uploaded
anything (`Tier.merge`, decided from the manifest). Files a rewrite or expiry retired are
deleted by the first pass after their delete delay (`Tier.delete_retired`), also for a topic
whose ``tiered.storage`` was turned off since (nothing else of it changes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from skiff.broker.compaction import is_compacted
from skiff.broker.tier.sealed import sealed_run
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.errors import SkiffError
from skiff.common.limits import (TIER_INDEX_OLD_MAX_FILES, TIER_SEGMENT_MAX_BYTES, TIER_SEGMENT_MAX_MESSAGES,
                                 TIER_TOMBSTONE_LEARN_MAX_FILES, TIER_UNTIERED_LOOKUP_MAX_TOPICS)
from skiff.common.record import read_head
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import (delete_retention_ms, retention_local_ms, retention_tiered_ms,
                                                   tiered_storage)
from skiff.store import MessageStore
from skiff.tier.columns import records_to_table
from skiff.tier.manifest import Manifest, ManifestError
from skiff.tier.tier import Tier

log = logging.getLogger(__name__)

_MS_PER_HOUR = 3_600_000


class NotMasterError(SkiffError):
    """An upload asked of a broker that is not its group's master (a slave, or a master that
    stepped down): only the master writes the tier."""


@dataclass(frozen=True, slots=True)
class Uploaded:
    """What one pass uploaded."""

    files: int = 0
    rows: int = 0
    file_bytes: int = 0
    record_bytes: int = 0


class TierUploader:
    def __init__(self, store: MessageStore, topics: TopicConfigManager, tier: Tier, broker_name: str,
                 seal_ms: int, clock: Clock, delete_grace_ms: int = 86_400_000) -> None:
        self.store = store
        self.topics = topics
        self.tier = tier
        self.broker_name = broker_name
        self.seal_ms = seal_ms
        self.clock = clock
        self.manifests: dict[str, Manifest] = {}
        """The manifest of each topic as last read or written (reads and the hold use it, with
        no request to the tier)."""
        self.totals = Uploaded()
        self.last_error = ""
        self.delete_grace_ms = delete_grace_ms
        self._gone_since: dict[str, int] = {}
        """Topics whose tier this uploader wrote, deleted on the broker since (ms): their tier goes
        after the grace period."""
        self._looked_up: set[str] = set()
        """Topics not tiered whose manifest this uploader looked for in the tier (once each)."""
        self._lock = threading.Lock()  # one pass at a time: the periodic one and `skiff topic tier upload`

    def tiered_topics(self) -> Iterator[TopicConfig]:
        for name in self.topics.topics():
            tc = self.topics.get(name)
            if tc is not None and self.is_tiered(name):
                yield tc

    def is_tiered(self, topic: str) -> bool:
        tc = self.topics.get(topic)
        return tc is not None and bool(tc.attributes) and tiered_storage(tc.attributes)

    def manifest(self, topic: str) -> Manifest:
        """The topic's manifest: the one kept, else the tier's (its orphan files then removed)."""
        m = self.manifests.get(topic)
        if m is None:
            m = self.tier.manifest(topic, self.broker_name)
            self.tier.collect_orphans(m)
            self.manifests[topic] = m
        return m

    def run(self, topic: str | None = None) -> Uploaded:
        """Upload what is sealed, of one topic or every tiered topic (on a worker thread). Refused
        on a slave (its store a replica): only the group's master writes the tier, so an upload asked
        of a slave (TIER_UPLOAD_NOW) must not race the master's manifest."""
        if self.store.replica:
            raise NotMasterError(f"{self.broker_name}: this broker is a slave; only its master uploads to the tier")
        with self._lock:
            done = Uploaded()
            for tc in self.tiered_topics():
                if topic is None or tc.topic_name == topic:
                    self._index_old(tc.topic_name)
                    compacted = is_compacted(tc)
                    for q in self.store.queue_ids(tc.topic_name):
                        done = _plus(done, self._upload_queue(tc.topic_name, q, compacted))
                        if compacted:
                            self._trim_compacted(tc, q)
                    if compacted:
                        self._learn_tombstones(tc.topic_name)
                        self._expire_tombstones(tc)
                        self._merge(tc.topic_name)
                    self._expire(tc)
                    self._delete_retired(tc.topic_name)
            self.totals = _plus(self.totals, done)
            if topic is None:
                self._delete_untiered_retired()
                self._delete_gone()
            return done

    def _index_old(self, topic: str) -> None:
        """Index a few of the topic's files uploaded before key indexes existed (each is fetched)."""
        self._on_old_files(topic, "indexing", lambda m: self.tier.index_old(m, TIER_INDEX_OLD_MAX_FILES))

    def _learn_tombstones(self, topic: str) -> None:
        """Record the oldest tombstone of a few of the compacted topic's files uploaded before it
        was recorded (each is fetched), so `_expire_tombstones` reaches them."""
        self._on_old_files(topic, "looking for tombstones in",
                           lambda m: self.tier.learn_tombstones(m, TIER_TOMBSTONE_LEARN_MAX_FILES))

    def _on_old_files(self, topic: str, what: str, step: Callable[[Manifest], Manifest]) -> None:
        """The topic's manifest after ``step``, which brings a few files of an older build up to
        date; a file that cannot be read is logged and tried again next pass (uploads go on)."""
        m = self.manifest(topic)
        try:
            self.manifests[topic] = step(m)
        except Exception as exc:  # a damaged or unreachable old file must not stop the uploads
            log.warning("tier: %s old files of %s in %s failed (tried again next pass): %s", what, topic,
                        self.tier.backend.url, exc)

    def _merge(self, topic: str) -> None:
        """Merge the compacted topic's small adjacent files also where this pass uploaded nothing
        (`Tier.merge`: from the manifest alone; a fetch only for a merge)."""
        m = self.manifest(topic)
        self.manifests[topic] = self.tier.merge(m, m.queue_ids())

    def _delete_untiered_retired(self) -> None:
        """Delete the due retired files of topics whose ``tiered.storage`` is off but which have a
        manifest (turned off after a rewrite or expiry retired files): nothing else of their tier
        changes, and reads do not use it. A few such topics a pass are looked up in the tier, once
        each after a start (`_look_up_untiered`)."""
        self._look_up_untiered()
        for topic, m in list(self.manifests.items()):
            if m.retired and self.topics.get(topic) is not None and not self.is_tiered(topic):
                self.manifests[topic] = self.tier.delete_retired(m)

    def _look_up_untiered(self) -> None:
        """Read the manifest of up to ``TIER_UNTIERED_LOOKUP_MAX_TOPICS`` topics that are not tiered
        and not looked up yet; keep those that exist. A tier that cannot be read stops the
        lookups until the next pass; a damaged manifest is logged and left alone."""
        fresh = [t for t in self.topics.topics() if t not in self.manifests and t not in self._looked_up
                 and not self.is_tiered(t)][:TIER_UNTIERED_LOOKUP_MAX_TOPICS]
        for topic in fresh:
            try:
                m = self.tier.manifest(topic, self.broker_name)
            except ManifestError as exc:
                log.warning("tier: the manifest of untiered topic %s is damaged; its retired files stay: %s",
                            topic, exc)
            except Exception as exc:  # an unreachable tier: the lookups wait for the next pass
                log.warning("tier: looking for a manifest of %s in %s failed (tried again next pass): %s", topic,
                            self.tier.backend.url, exc)
                return
            else:
                if m.segments or m.retired:  # kept as a tiered topic's first read is: its orphans removed
                    self.tier.collect_orphans(m)
                    self.manifests[topic] = m
            self._looked_up.add(topic)

    def _delete_gone(self) -> None:
        """Delete the tier of topics deleted from this broker more than the grace period ago. Only
        topics whose manifest this uploader holds are known (a topic deleted while the broker was
        down keeps its tier: docs/tiered-storage.md)."""
        now = self.clock.now_ms()
        for topic in list(self.manifests):
            if self.topics.get(topic) is not None:
                self._gone_since.pop(topic, None)
                continue
            since = self._gone_since.setdefault(topic, now)
            if since == now:
                log.warning("tier: topic %s was deleted; its tier at %s goes in %d ms unless it comes back",
                            topic, self.tier.backend.url, self.delete_grace_ms)
            if now - since >= self.delete_grace_ms:
                count = self.tier.delete(self.manifests.pop(topic))
                del self._gone_since[topic]
                log.warning("tier: deleted the tier of deleted topic %s (%d files)", topic, count)

    def _delete_retired(self, topic: str) -> None:
        """Delete the topic's files that rewrites and expiry retired more than the tier's delete
        delay ago (``tierFileDeleteDelayMs``): a reader planned from an older manifest had that
        long to read them."""
        self.manifests[topic] = self.tier.delete_retired(self.manifest(topic))

    def _expire(self, tc: TopicConfig) -> None:
        keep_ms = retention_tiered_ms(tc.attributes)
        if keep_ms >= 0:
            m, _ = self.tier.expire(self.manifest(tc.topic_name), self.clock.now_ms() - keep_ms)
            self.manifests[tc.topic_name] = m

    def sealed_end(self, topic: str, queue_id: int) -> int:
        """The queue's first offset that may not be uploaded yet: too recent, or, in a compacted
        topic, not compacted yet (from its cleaned point on)."""
        end = self.store.get_max_offset(topic, queue_id)
        if self.seal_ms > 0:
            end = min(end, self.store.get_offset_by_time(topic, queue_id, self.clock.now_ms() - self.seal_ms))
        if is_compacted(self.topics.get(topic)):
            end = min(end, self._cleaned_offset(topic, queue_id))
        return end

    def _cleaned_offset(self, topic: str, queue_id: int) -> int:
        """Where the queue's compacted records end (its first offset before a first compaction):
        a compacted topic uploads its compacted segment, the latest record of each key of the
        range (docs/tiered-storage.md), never the dirty records a later pass would remove."""
        seg = self.store.compaction.segments.get((topic, queue_id))
        return self.store.get_min_offset(topic, queue_id) if seg is None else seg.cleaned_offset

    def _expire_tombstones(self, tc: TopicConfig) -> None:
        """Take the compacted topic's tombstones older than its delete.retention.ms out of the tier,
        as compaction takes them out of the queue."""
        before = self.clock.now_ms() - delete_retention_ms(tc.attributes)
        self.manifests[tc.topic_name] = self.tier.expire_tombstones(self.manifest(tc.topic_name), before)

    def _trim_compacted(self, tc: TopicConfig, queue_id: int) -> None:
        """Drop the compacted segment's records that are in the tier and older than the topic's
        retention.local.ms and the store's fileReservedTime, the age at which a normal topic's
        uploaded CommitLog files go (the CommitLog's retention never frees a compacted
        segment: its records are copies)."""
        topic = tc.topic_name
        keep_ms = max(retention_local_ms(tc.attributes), self.store.config.file_reserved_time * _MS_PER_HOUR)
        below = min(self.manifest(topic).end_offset(queue_id),
                    self.store.get_offset_by_time(topic, queue_id, self.clock.now_ms() - keep_ms))
        dropped = self.store.compaction.trim(topic, queue_id, below)
        if dropped:
            log.info("tier: %s queue %d: %d compacted records below offset %d are only in the tier now", topic,
                     queue_id, dropped, below)

    def _upload_queue(self, topic: str, queue_id: int, compacted: bool = False) -> Uploaded:
        done = Uploaded()
        m = self.manifest(topic)
        start = max(m.end_offset(queue_id), self.store.get_min_offset(topic, queue_id))
        end = self.sealed_end(topic, queue_id)
        while start < end:
            run, next_offset = self._read(topic, queue_id, start, end)
            if not run:
                break
            m, seg = self.tier.upload(m, records_to_table(run, self.broker_name), compacted=compacted)
            self.manifests[topic] = m
            done = _plus(done, Uploaded(1, seg.rows, seg.size_bytes, len(run)))
            log.info("tier: %s queue %d offsets %d-%d uploaded (%d rows, %d bytes)", topic, queue_id,
                     seg.first_offset, seg.last_offset, seg.rows, seg.size_bytes)
            start = next_offset
        return done

    def _read(self, topic: str, queue_id: int, start: int, end: int) -> tuple[bytes, int]:
        """Sealed records of the queue from ``start`` for one file, and the offset after them."""
        parts: list[bytes] = []
        rows = size = 0
        offset = start
        while offset < end and rows < TIER_SEGMENT_MAX_MESSAGES and size < TIER_SEGMENT_MAX_BYTES:
            result = self.store.get_messages(topic, queue_id, offset, TIER_SEGMENT_MAX_MESSAGES - rows,
                                             max_bytes=TIER_SEGMENT_MAX_BYTES - size)
            if not result.found:
                break
            buf = b"".join(result.buffers)
            run = sealed_run(buf, end, self.store.flushed_offset)
            if not run:
                break
            parts.append(run)
            size += len(run)
            if len(run) < len(buf):  # stopped at the sealed end or at unflushed bytes
                offset = _after(run)
                break
            rows += result.message_count
            offset = result.next_begin_offset
        return b"".join(parts), offset


def _after(run: bytes) -> int:
    """The queue offset after the last record of ``run``."""
    pos = last = 0
    while pos < len(run):
        head = read_head(run, pos)
        last = head.queue_offset
        pos += head.total_size
    return last + 1


def _plus(a: Uploaded, b: Uploaded) -> Uploaded:
    return Uploaded(a.files + b.files, a.rows + b.rows, a.file_bytes + b.file_bytes, a.record_bytes + b.record_bytes)
