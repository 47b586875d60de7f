"""Skiff's compaction admin requests (`SkiffRequestCode`; RocketMQ has none).

GET_COMPACTION_STATUS (10010) and COMPACT_TOPIC (10011) name the topic; both answer
a `skiff.protocol.bodies.compaction.TopicCompactionBody` (COMPACT_TOPIC after the
run, with what each queue's run did).
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header


@dataclass(frozen=True, slots=True)
class CompactionRequestHeader(Header):
    topic: str
