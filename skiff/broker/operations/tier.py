"""A topic's tier (docs/tier.md): its state, and an upload of its sealed segments on demand,
for Skiff's GET_TIER_STATUS and TIER_UPLOAD_NOW.

Refusals: the topic must be here (`Gate.topic`: TOPIC_NOT_EXIST); a broker without
``tierStorageUrl`` has no tier (SYSTEM_ERROR saying how to set one); the tier's own errors (an
unreachable bucket, a bad manifest) are SYSTEM_ERROR naming the topic and the tier's URL, as
the admin tool shows them to whoever runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.protocol.bodies.tier import TopicTierBody
from skiff.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from skiff.broker.tier.service import TierService

NO_TIER = Refusal(ResponseCode.SYSTEM_ERROR, "this broker has no tier: set tierStorageUrl "
                                             "(file:///dir or s3://bucket/prefix)")


class TierOperation:
    def __init__(self, gate: Gate, service: TierService | None) -> None:
        """``service``: None on a broker without ``tierStorageUrl``."""
        self.gate = gate
        self.service = service

    async def status(self, topic: str) -> TopicTierBody | Refusal:
        """The topic's tier state."""
        return await self._state(topic, upload=False)

    async def upload(self, topic: str) -> TopicTierBody | Refusal:
        """One upload pass over the topic (on a worker thread), then its tier state."""
        return await self._state(topic, upload=True)

    async def _state(self, topic: str, *, upload: bool) -> TopicTierBody | Refusal:
        tc = self.gate.topic(topic)
        if isinstance(tc, Refusal):
            return tc
        if self.service is None:
            return NO_TIER
        try:
            if upload:
                await self.service.upload(topic)
            return self.service.status(tc)
        except Exception as exc:  # the tier's errors (unreachable bucket, bad manifest) are the answer
            return Refusal(ResponseCode.SYSTEM_ERROR, f"tier of {topic} at {self.service.tier.backend.url}: {exc}")
