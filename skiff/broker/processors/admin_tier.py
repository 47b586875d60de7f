"""Skiff's tier admin requests: GET_TIER_STATUS (10020) and TIER_UPLOAD_NOW (10021).

Both name a topic (`CompactionRequestHeader`'s one field) and answer its tier state
(`TopicTierBody`) or the refusal of `TierOperation`, which holds the work: this adapter
decodes the topic, calls it and encodes the outcome.
"""

from __future__ import annotations

from skiff.broker.operations.tier import TierOperation
from skiff.broker.processors.answers import answer
from skiff.protocol.codes import SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.transport.connection import Connection, Handler


class TierAdminProcessor:
    def __init__(self, operation: TierOperation) -> None:
        self.operation = operation

    def handlers(self) -> dict[int, Handler]:
        return {SkiffRequestCode.GET_TIER_STATUS: self.status, SkiffRequestCode.TIER_UPLOAD_NOW: self.upload}

    async def status(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return answer(req, await self.operation.status(CompactionRequestHeader.from_ext(req.ext_fields).topic))

    async def upload(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return answer(req, await self.operation.upload(CompactionRequestHeader.from_ext(req.ext_fields).topic))
