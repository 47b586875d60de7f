"""The tier as the broker runs it: uploader, reads, retention hold and status in one place.

Made by the server only when ``tierStorageUrl`` is set. The uploader is a master
periodic (a slave never writes the tier); the hold is registered with the store's
retention on every broker, so a CommitLog file holding a tiered topic's messages that
are not yet uploaded, or younger than the topic's ``retention.local.ms``, is kept
whatever else wants it gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from skiff.broker.config import BrokerConfig
from skiff.broker.tier.reads import TierReads
from skiff.broker.tier.uploader import TierUploader, Uploaded
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.service import Periodic
from skiff.protocol.bodies.tier import QueueTierBody, TopicTierBody
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import retention_local_ms, retention_tiered_ms, tiered_storage
from skiff.store import MessageStore
from skiff.tier.backends import backend_from_url
from skiff.tier.manifest import Manifest
from skiff.tier.tier import Tier

log = logging.getLogger(__name__)

_SIZES_AT_ONCE = 65_536
"""ConsumeQueue entries summed per read when a status adds up a queue's local bytes."""


class TierMetric(NamedTuple):
    name: str
    doc: str
    counter: bool
    labels: tuple[str, ...]
    rows: Sequence[tuple[tuple[str, ...], float]]


class TierService:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.tier = Tier(backend_from_url(config.tier_storage_url, endpoint_url=config.tier_s3_endpoint or None,
                                          region=config.tier_s3_region or None),
                         clock=clock, delete_delay_ms=config.tier_file_delete_delay_ms,
                         merge_max_bytes=config.tier_compacted_merge_max_bytes)
        self.uploader = TierUploader(store, topics, self.tier, config.broker_name, config.tier_seal_ms, clock,
                                     config.tier_delete_grace_ms)
        self.reads = TierReads(self.tier, self.uploader)
        self._read_at: dict[str, int] = {}
        store.retention.add_hold(self.hold)

    def periodic(self) -> Periodic:
        return Periodic("tier-upload", self.config.tier_upload_interval_ms / 1000.0, self._upload_pass)

    async def _upload_pass(self) -> None:
        await self.upload()

    async def upload(self, topic: str | None = None) -> Uploaded:
        """One upload pass on a worker thread; a failure is logged and kept for the status."""
        try:
            done = await asyncio.to_thread(self.uploader.run, topic)
            self.uploader.last_error = ""
            return done
        except Exception as exc:
            self.uploader.last_error = str(exc)
            log.error("tier upload to %s failed: %s (retried next pass)", self.tier.backend.url, exc)
            raise

    def close(self) -> None:
        self.reads.close()

    def first_offset(self, topic: str, queue_id: int) -> int | None:
        """The queue's first offset in the tier, from the manifest kept (no request to the tier;
        None before the uploader or a read has loaded it)."""
        if not self.uploader.is_tiered(topic):
            return None
        m = self.uploader.manifests.get(topic) or self.reads.manifest_kept(topic)
        return None if m is None else m.first_offset(queue_id)

    def manifest_of(self, topic: str) -> Manifest | None:
        """The tiered topic's manifest: the uploader's, else the tier's (read again once older
        than an upload interval; None when the topic is not tiered or the tier cannot be read)."""
        if not self.uploader.is_tiered(topic):
            return None
        return self.uploader.manifests.get(topic) or self._read_manifest(topic, self.clock.now_ms())

    # -- metrics -----------------------------------------------------------------------

    def metrics(self) -> list[TierMetric]:
        """The tier's Prometheus rows (docs/metrics.md), from what is kept: no request to the tier."""
        lag, remote = [], []
        for tc in self.uploader.tiered_topics():
            topic = tc.topic_name
            m = self.uploader.manifests.get(topic) or self.reads.manifest_kept(topic)
            if m is None:
                continue
            behind = sum(max(0, self.store.get_max_offset(topic, q) - max(m.end_offset(q), self.store.get_min_offset(
                topic, q))) for q in self.store.queue_ids(topic))
            lag.append(((topic,), float(behind)))
            remote.append(((topic,), float(m.remote_bytes())))
        t = self.uploader.totals
        return [
            TierMetric("skiff_tier_uploaded_bytes", "Parquet bytes this broker uploaded since it started.", True, (),
                       [((), float(t.file_bytes))]),
            TierMetric("skiff_tier_uploaded_messages", "Messages this broker uploaded since it started.", True, (),
                       [((), float(t.rows))]),
            TierMetric("skiff_tier_read_messages", "Messages pulls were answered from the tier.", True, (),
                       [((), float(self.reads.served))]),
            TierMetric("skiff_tier_fetch_errors", "Tier files that could not be fetched for a pull.", True, (),
                       [((), float(self.reads.fetch_errors))]),
            TierMetric("skiff_tier_lag_messages", "Messages of a tiered topic kept locally and not yet uploaded.",
                       False, ("topic",), lag),
            TierMetric("skiff_tier_remote_bytes", "Bytes of a tiered topic's files in the tier.", False, ("topic",),
                       remote),
        ]

    # -- retention ---------------------------------------------------------------------

    def hold(self) -> int | None:
        """The CommitLog offset below which retention may delete, as far as the tier is
        concerned: the first record of a tiered queue that is not uploaded, or is younger than
        its topic's retention.local.ms (None: no tiered topic)."""
        held: int | None = None
        floor = self.store.max_physical_offset  # anything appended after this look is above it
        now = self.clock.now_ms()
        for tc in self.uploader.tiered_topics():
            held = floor if held is None else held
            m = self.uploader.manifests.get(tc.topic_name) or self._read_manifest(tc.topic_name, now)
            for q in self.store.queue_ids(tc.topic_name):
                phys = self._keep_from(tc, m, q, now)
                if phys is not None:
                    held = min(held, phys)
        return held

    def _read_manifest(self, topic: str, now: int) -> Manifest | None:
        """Where this broker does not upload (a slave, or a master before its first pass): the
        tier's manifest, read again once it is older than an upload interval, and shared with
        the reads, so a pull finds whatever retention deleted on its word. None when the tier
        cannot be read (everything of the topic is then held)."""
        kept = self.reads.manifest_kept(topic)
        if kept is not None and now - self._read_at.get(topic, 0) < self.config.tier_upload_interval_ms:
            return kept
        try:
            m = self.tier.manifest(topic, self.uploader.broker_name)
        except Exception as exc:  # an unreachable tier holds, it does not fail retention
            log.warning("tier: reading the manifest of %s failed (%s): its local files stay", topic, exc)
            return kept
        self.reads.keep_manifest(m)
        self._read_at[topic] = now
        return m

    def _keep_from(self, tc: TopicConfig, m: Manifest | None, queue_id: int, now: int) -> int | None:
        topic = tc.topic_name
        keep = m.end_offset(queue_id) if m is not None else 0
        local_ms = retention_local_ms(tc.attributes)
        if local_ms > 0:
            keep = min(keep, self.store.get_offset_by_time(topic, queue_id, now - local_ms))
        cq = self.store.queues.get(topic, queue_id)
        if cq is None:
            return None
        entry = cq.entry(max(keep, cq.min_offset))
        return None if entry is None else int(entry[0])

    # -- status ------------------------------------------------------------------------

    def status(self, tc: TopicConfig) -> TopicTierBody:
        """The topic's tier state (reads the manifest from the tier when it is not kept yet)."""
        topic = tc.topic_name
        attrs = tc.attributes or {}
        m = self.uploader.manifests.get(topic) or self.tier.manifest(topic, self.uploader.broker_name)
        queues = []
        for q in sorted(set(self.store.queue_ids(topic)) | set(m.queue_ids())):
            lo, hi = self.store.get_min_offset(topic, q), self.store.get_max_offset(topic, q)
            segs = m.queue(q)
            uploaded_to = m.end_offset(q)
            queues.append(QueueTierBody(
                q, uploaded_to, lo, hi, max(0, hi - max(uploaded_to, lo)), self._local_bytes(topic, q, lo, hi),
                len(segs), sum(s.rows for s in segs), sum(s.size_bytes for s in segs),
                segs[0].first_offset if segs else -1))
        totals = self.uploader.totals
        return TopicTierBody(topic, tiered_storage(attrs), self.tier.backend.url, retention_local_ms(attrs),
                             retention_tiered_ms(attrs), totals.files, totals.file_bytes, tuple(queues))

    def _local_bytes(self, topic: str, queue_id: int, lo: int, hi: int) -> int:
        cq = self.store.queues.get(topic, queue_id)
        total, offset = 0, lo
        while cq is not None and offset < hi:
            entries = cq.read(offset, _SIZES_AT_ONCE)
            if entries is None or not len(entries):
                break
            total += int(np.sum(entries["size"], dtype=np.int64))
            offset += len(entries)
        return total
