"""Bodies of Skiff's tier admin answers (GET_TIER_STATUS, TIER_UPLOAD_NOW).

    {"topic":"Orders","tiered":true,"url":"s3://bucket/prefix","retentionLocalMs":0,
     "retentionTieredMs":-1,"uploadedFiles":3,"uploadedBytes":123456,
     "queues":[{"queueId":0,"uploadedTo":4096,"localMinOffset":1024,"localMaxOffset":5000,
                "lagMessages":904,"localBytes":812000,"remoteFiles":1,"remoteRows":4096,
                "remoteBytes":81234,"firstRemoteOffset":0}]}
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.bodies.base import JsonBody


@dataclass(frozen=True, slots=True)
class QueueTierBody(JsonBody):
    queue_id: int
    uploaded_to: int
    """The first offset not in the tier."""
    local_min_offset: int
    local_max_offset: int
    lag_messages: int
    """Messages kept locally and not yet in the tier (local max − uploaded to)."""
    local_bytes: int
    """Stored bytes of the queue's local messages."""
    remote_files: int
    remote_rows: int
    remote_bytes: int
    first_remote_offset: int = -1
    """-1: nothing in the tier."""


@dataclass(frozen=True, slots=True)
class TopicTierBody(JsonBody):
    topic: str
    tiered: bool
    url: str
    retention_local_ms: int
    retention_tiered_ms: int
    uploaded_files: int = 0
    """Files this broker uploaded since it started (every topic), and their bytes."""
    uploaded_bytes: int = 0
    queues: tuple[QueueTierBody, ...] = ()
