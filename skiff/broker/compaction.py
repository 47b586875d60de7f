"""The broker's side of compacted topics: which topics are compacted, when their queues
are due, and refusing messages a compacted topic cannot keep.

A topic is compacted when its ``cleanup.policy`` attribute is COMPACTION. Every
``compactionScheduleInternal`` ms a pass on a worker thread looks at each queue of
each such topic and compacts it (`MessageStore.compact`) when its dirty bytes reach
``compactionMinDirtyRatio`` of its bytes or a tombstone it keeps has outlived the
topic's ``delete.retention.ms``. Compaction reads the CommitLog and writes its own
files, so appends go on meanwhile; the pass runs off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.service import Periodic
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import CleanupPolicy, cleanup_policy, delete_retention_ms
from skiff.store import MessageInput, MessageStore, StoreConfig
from skiff.store.compaction import CompactionReport, CompactionStatus

log = logging.getLogger(__name__)


def is_compacted(tc: TopicConfig | None) -> bool:
    return tc is not None and bool(tc.attributes) and cleanup_policy(tc.attributes) is CleanupPolicy.COMPACTION


def keys_refusal(topic: str, inputs: Sequence[MessageInput]) -> str | None:
    """Why a compacted topic refuses these messages (one without KEYS), or None."""
    for i, m in enumerate(inputs):
        if not m.keys or not m.keys.strip():
            which = "the message" if len(inputs) == 1 else f"message {i} of the batch"
            return (f"topic {topic} is compacted (cleanup.policy=COMPACTION): {which} has no KEYS; "
                    f"compaction keeps the latest message of each key, so every message needs one")
    return None


class CompactionService:
    def __init__(self, store: MessageStore, topics: TopicConfigManager, store_config: StoreConfig,
                 clock: Clock) -> None:
        self.store = store
        self.topics = topics
        self.store_config = store_config
        self.clock = clock

    def service(self) -> Periodic:
        return Periodic("compaction", self.store_config.compaction_schedule_internal / 1000.0, self.run_due)

    async def run_due(self) -> None:
        await asyncio.to_thread(self._due_pass)

    def _due_pass(self) -> list[CompactionReport]:
        compacted = [tc for tc in map(self.topics.get, self.topics.topics()) if tc is not None and is_compacted(tc)]
        self.store.compaction.retained_topics = frozenset(tc.topic_name for tc in compacted)
        reports = []
        for tc in compacted:
            for status in self.status(tc.topic_name):
                if self._due(status, delete_retention_ms(tc.attributes)):
                    reports.append(self._compact(tc, status.queue_id))
        return reports

    def _due(self, status: CompactionStatus, retention_ms: int) -> bool:
        if status.holds_retention:
            return True
        if status.dirty_bytes and status.dirty_ratio >= self.store_config.compaction_min_dirty_ratio:
            return True
        return 0 <= status.oldest_tombstone_ms <= self.clock.now_ms() - retention_ms

    def status(self, topic: str) -> list[CompactionStatus]:
        return [self.store.compaction_status(topic, q) for q in self.store.queue_ids(topic)]

    def compact_topic(self, tc: TopicConfig) -> list[CompactionReport]:
        """Compact every queue of ``tc`` now, whatever its dirty ratio (run on a worker thread)."""
        return [self._compact(tc, q) for q in self.store.queue_ids(tc.topic_name)]

    def _compact(self, tc: TopicConfig, queue_id: int) -> CompactionReport:
        report = self.store.compact(tc.topic_name, queue_id, delete_retention_ms=delete_retention_ms(tc.attributes),
                                    max_offset_map_size=self.store_config.max_offset_map_size)
        if report.passes:
            log.info("compacted %s:%d to offset %d: kept %d of %d records, %d bytes reclaimed in %.0f ms",
                     tc.topic_name, queue_id, report.cleaned_offset, report.records_kept, report.records_read,
                     report.bytes_reclaimed, report.elapsed_ms)
        return report
