"""Bodies of Skiff's compaction admin answers (GET_COMPACTION_STATUS, COMPACT_TOPIC).

    {"topic":"Prices","cleanupPolicy":"COMPACTION","deleteRetentionMs":86400000,
     "queues":[{"queueId":0,"startOffset":0,"cleanedOffset":5000,"maxOffset":5200,
                "segmentRecords":100,"segmentBytes":12000,"dirtyBytes":24000,"dirtyRatio":0.67,
                "lastRunMs":1714561200000,"bytesReclaimed":588000,"runs":3}],
     "runs":[{"queueId":0,"passes":1,"recordsRead":5100,"recordsKept":100,...}]}
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.bodies.base import JsonBody


@dataclass(frozen=True, slots=True)
class QueueCompactionBody(JsonBody):
    queue_id: int
    start_offset: int
    cleaned_offset: int
    """Offsets below this were compacted (gaps are removed records)."""
    max_offset: int
    segment_records: int = 0
    segment_bytes: int = 0
    dirty_bytes: int = 0
    dirty_ratio: float = 0.0
    last_run_ms: int = 0
    bytes_reclaimed: int = 0
    runs: int = 0


@dataclass(frozen=True, slots=True)
class CompactionRunBody(JsonBody):
    """What one queue's compaction did (COMPACT_TOPIC)."""

    queue_id: int
    passes: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_reclaimed: int = 0
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class TopicCompactionBody(JsonBody):
    topic: str
    cleanup_policy: str
    delete_retention_ms: int
    queues: tuple[QueueCompactionBody, ...] = ()
    runs: tuple[CompactionRunBody, ...] = ()
