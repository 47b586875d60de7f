"""Redis Streams through redis-py's asyncio client.

Producer: XADD commands pipelined (no MULTI), one pipeline per batch, several
pipelines in flight on the client's connection pool. Consumer: a consumer
group read with XREADGROUP COUNT=batch BLOCK, the XACK of the previous batch
pipelined with the next read, so a batch costs one round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError
from redis.utils import HIREDIS_AVAILABLE

from skiff.bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder

FIELD = b"d"
BLOCK_MS = 1000
PARSER = "hiredis reply parser" if HIREDIS_AVAILABLE else "pure-Python reply parser (hiredis not installed)"


class RedisStreamsDriver(Driver):
    how = f"redis-py asyncio, {PARSER}: pipelined XADD per batch; XREADGROUP COUNT=fetch with the XACK pipelined"

    async def connect(self) -> None:
        self.client = aioredis.Redis(host=self.endpoint["host"], port=self.endpoint["port"])
        await self.client.ping()

    async def prepare(self, topic: str) -> None:
        try:
            await self.client.xgroup_create(topic, CONSUMER_GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        pipe = self.client.pipeline(transaction=False)
        for body in bodies:
            pipe.xadd(topic, {FIELD: body})
        return asyncio.ensure_future(pipe.execute())

    async def consume(self, topic: str, recorder: Recorder) -> None:
        acks: list[bytes] = []
        recorder.ready.set()
        while not recorder.done.is_set():
            pipe = self.client.pipeline(transaction=False)
            if acks:
                pipe.xack(topic, CONSUMER_GROUP, *acks)
            pipe.xreadgroup(CONSUMER_GROUP, "c1", {topic: ">"}, count=self.options.fetch_count, block=BLOCK_MS)
            reply = (await pipe.execute())[-1]
            entries = reply[0][1] if reply else []
            acks = [entry_id for entry_id, _ in entries]
            recorder.add(fields[FIELD] for _, fields in entries)
        if acks:
            await self.client.xack(topic, CONSUMER_GROUP, *acks)

    async def delete(self, topic: str) -> None:
        await self.client.delete(topic)

    async def close(self) -> None:
        await self.client.aclose()
