"""Skiff's tier admin requests: GET_TIER_STATUS (10020) and TIER_UPLOAD_NOW (10021).

Both name a topic (`CompactionRequestHeader`'s one field) and answer its tier state
(`TopicTierBody`); TIER_UPLOAD_NOW first runs the uploader over the topic (on a worker
thread). A broker without ``tierStorageUrl`` answers that it has no tier.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from skiff.broker.topics import TopicConfigManager
from skiff.protocol.codes import ResponseCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.transport.connection import Connection, Handler

if TYPE_CHECKING:
    from skiff.broker.tier.service import TierService

log = logging.getLogger(__name__)


class TierAdminProcessor:
    def __init__(self, topics: TopicConfigManager, service: TierService | None) -> None:
        self.topics = topics
        self.service = service

    def handlers(self) -> dict[int, Handler]:
        return {SkiffRequestCode.GET_TIER_STATUS: self.status, SkiffRequestCode.TIER_UPLOAD_NOW: self.upload}

    async def status(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return await self._answer(req, upload=False)

    async def upload(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return await self._answer(req, upload=True)

    async def _answer(self, req: RemotingCommand, *, upload: bool) -> RemotingCommand:
        topic = CompactionRequestHeader.from_ext(req.ext_fields).topic
        tc = self.topics.get(topic)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist on this broker")
        if self.service is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "this broker has no tier: set tierStorageUrl "
                                                           "(file:///dir or s3://bucket/prefix)")
        try:
            if upload:
                await self.service.upload(topic)
            body = self.service.status(tc)
        except Exception as exc:  # the tier's errors (unreachable bucket, bad manifest) are the answer
            return req.response(ResponseCode.SYSTEM_ERROR, f"tier of {topic} at {self.service.tier.backend.url}: {exc}")
        return req.response(body=body.to_json())
