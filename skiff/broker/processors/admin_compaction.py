"""Skiff's compaction admin requests: GET_COMPACTION_STATUS (10010) and COMPACT_TOPIC (10011),
the remoting door's adapter over `CompactionOperation`.

Both name a topic and answer its cleanup policy and each queue's compaction state
(`TopicCompactionBody`); COMPACT_TOPIC first compacts every queue of the topic, whatever
their dirty ratios, and adds what each run did. RocketMQ has neither request, hence codes
from `SkiffRequestCode`.
"""

from __future__ import annotations

from skiff.broker.operations import CompactionOperation, CompactionState, Refusal
from skiff.broker.processors.answers import answer
from skiff.protocol.bodies.compaction import CompactionRunBody, QueueCompactionBody, TopicCompactionBody
from skiff.protocol.bodies.topic_attributes import cleanup_policy, delete_retention_ms
from skiff.protocol.codes import SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.transport.connection import Connection, Handler


class CompactionAdminProcessor:
    def __init__(self, operation: CompactionOperation) -> None:
        self.operation = operation

    def handlers(self) -> dict[int, Handler]:
        return {
            SkiffRequestCode.GET_COMPACTION_STATUS: self.status,
            SkiffRequestCode.COMPACT_TOPIC: self.compact,
        }

    async def status(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return _answer(req, await self.operation.status(CompactionRequestHeader.from_ext(req.ext_fields).topic))

    async def compact(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return _answer(req, await self.operation.compact(CompactionRequestHeader.from_ext(req.ext_fields).topic))


def _answer(req: RemotingCommand, state: CompactionState | Refusal) -> RemotingCommand:
    return answer(req, state if isinstance(state, Refusal) else compaction_body(state))


def compaction_body(state: CompactionState) -> TopicCompactionBody:
    queues = tuple(QueueCompactionBody(
        s.queue_id, s.start_offset, s.cleaned_offset, s.max_offset, s.segment_records, s.segment_bytes,
        s.dirty_bytes, round(s.dirty_ratio, 4), s.last_run_ms, s.bytes_reclaimed, s.runs,
    ) for s in state.queues)
    runs = tuple(CompactionRunBody(r.queue_id, r.passes, r.records_read, r.records_kept, r.bytes_read,
                                   r.bytes_written, r.bytes_reclaimed, round(r.elapsed_ms, 3)) for r in state.runs)
    tc = state.topic
    return TopicCompactionBody(tc.topic_name, cleanup_policy(tc.attributes).value,
                               delete_retention_ms(tc.attributes), queues, runs)
