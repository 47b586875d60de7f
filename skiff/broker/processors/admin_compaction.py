"""Skiff's compaction admin requests: GET_COMPACTION_STATUS (10010) and COMPACT_TOPIC (10011).

Both name a topic and answer its cleanup policy and each queue's compaction state
(`TopicCompactionBody`); COMPACT_TOPIC first compacts every queue of the topic on a
worker thread, whatever their dirty ratios, and adds what each run did. RocketMQ has
neither request, hence codes from `SkiffRequestCode`.
"""

from __future__ import annotations

import asyncio
import logging

from skiff.broker.compaction import CompactionService, is_compacted
from skiff.broker.topics import TopicConfigManager
from skiff.protocol.bodies.compaction import CompactionRunBody, QueueCompactionBody, TopicCompactionBody
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import cleanup_policy, delete_retention_ms
from skiff.protocol.codes import ResponseCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.store.compaction import CompactionReport
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)


class CompactionAdminProcessor:
    def __init__(self, topics: TopicConfigManager, service: CompactionService) -> None:
        self.topics = topics
        self.service = service

    def handlers(self) -> dict[int, Handler]:
        return {
            SkiffRequestCode.GET_COMPACTION_STATUS: self.status,
            SkiffRequestCode.COMPACT_TOPIC: self.compact,
        }

    def _topic(self, req: RemotingCommand) -> TopicConfig | RemotingCommand:
        topic = CompactionRequestHeader.from_ext(req.ext_fields).topic
        tc = self.topics.get(topic)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        return tc

    async def status(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        tc = self._topic(req)
        if isinstance(tc, RemotingCommand):
            return tc
        return req.response(body=(await asyncio.to_thread(self._body, tc, [])).to_json())

    async def compact(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        tc = self._topic(req)
        if isinstance(tc, RemotingCommand):
            return tc
        if not is_compacted(tc):
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"topic {tc.topic_name} is not compacted (cleanup.policy is DELETE); set "
                                f"+cleanup.policy=COMPACTION first")
        try:
            reports = await asyncio.to_thread(self.service.compact_topic, tc)
        except OSError as exc:
            log.error("compacting %s failed: %s", tc.topic_name, exc)
            return req.response(ResponseCode.SYSTEM_ERROR, f"compacting {tc.topic_name} failed: {exc}; the queues "
                                                           f"keep their previous state")
        return req.response(body=(await asyncio.to_thread(self._body, tc, reports)).to_json())

    def _body(self, tc: TopicConfig, reports: list[CompactionReport]) -> TopicCompactionBody:
        queues = tuple(QueueCompactionBody(
            s.queue_id, s.start_offset, s.cleaned_offset, s.max_offset, s.segment_records, s.segment_bytes,
            s.dirty_bytes, round(s.dirty_ratio, 4), s.last_run_ms, s.bytes_reclaimed, s.runs,
        ) for s in self.service.status(tc.topic_name))
        runs = tuple(CompactionRunBody(r.queue_id, r.passes, r.records_read, r.records_kept, r.bytes_read,
                                       r.bytes_written, r.bytes_reclaimed, round(r.elapsed_ms, 3)) for r in reports)
        return TopicCompactionBody(tc.topic_name, cleanup_policy(tc.attributes).value,
                                   delete_retention_ms(tc.attributes), queues, runs)
