"""A compacted topic's state and a compaction on demand, for Skiff's GET_COMPACTION_STATUS and
COMPACT_TOPIC (`skiff topic compaction`, the dashboard).

Both name a topic and answer its cleanup policy and each queue's compaction state; a
compaction first compacts every queue of the topic on a worker thread, whatever their
dirty ratios, and adds what each run did. Reading the state reads the queues' files, so
it runs on a thread too. A compaction that fails (a full disk) is refused and leaves the
queues as they were.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from skiff.broker.compaction import CompactionService, is_compacted
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.codes import ResponseCode
from skiff.store.compaction import CompactionReport, CompactionStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CompactionState:
    topic: TopicConfig
    """The topic's config, whose attributes hold its cleanup policy and delete retention."""
    queues: list[CompactionStatus]
    runs: list[CompactionReport]
    """What the compaction asked for did, per queue (empty for a status request)."""


class CompactionOperation:
    def __init__(self, gate: Gate, service: CompactionService) -> None:
        self.gate = gate
        self.service = service

    async def status(self, topic: str) -> CompactionState | Refusal:
        tc = self.gate.topic(topic)
        if isinstance(tc, Refusal):
            return tc
        return await self._state(tc, [])

    async def compact(self, topic: str) -> CompactionState | Refusal:
        """Compact every queue of the topic now; a topic whose cleanup policy is DELETE is refused."""
        tc = self.gate.topic(topic)
        if isinstance(tc, Refusal):
            return tc
        if not is_compacted(tc):
            return Refusal(ResponseCode.SYSTEM_ERROR, f"topic {topic} is not compacted (cleanup.policy is DELETE); "
                                                      f"set +cleanup.policy=COMPACTION first", bad_request=True)
        try:
            runs = await asyncio.to_thread(self.service.compact_topic, tc)
        except OSError as exc:
            log.error("compacting %s failed: %s", topic, exc)
            return Refusal(ResponseCode.SYSTEM_ERROR, f"compacting {topic} failed: {exc}; the queues keep their "
                                                      f"previous state")
        return await self._state(tc, runs)

    async def _state(self, tc: TopicConfig, runs: list[CompactionReport]) -> CompactionState:
        queues = await asyncio.to_thread(self.service.status, tc.topic_name)
        return CompactionState(tc, queues, runs)
