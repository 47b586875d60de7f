"""NATS JetStream (file storage) through nats-py.

Producer: `publish_async` for every message of a batch (no round trip per
message; the server's PubAcks complete the futures), the batch done when all
its acks are in. Consumer: a durable pull consumer with AckPolicy.ALL,
`fetch(batch)` and one ack of the batch's last message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from skiff.bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder

FETCH_TIMEOUT_S = 1.0
PREPARE_TIMEOUT_S = 15.0
"""How long `prepare` tries again while the server still holds the subject of a stream of the
same name deleted by the phase before (nats-server 2.9 answers ``subjects overlap with an
existing stream``, error 10065, until its delete completes)."""
SUBJECTS_OVERLAP = 10065


class NatsJetStreamDriver(Driver):
    how = ("nats-py: publish_async per message (PubAck futures, a batch in flight per window slot); "
           "durable pull consumer, fetch(fetch), AckPolicy.ALL with one ack per fetch")

    async def connect(self) -> None:
        self.nc = await nats.connect(self.endpoint["url"], max_reconnect_attempts=0)
        self.js = self.nc.jetstream()

    async def prepare(self, topic: str) -> None:
        config = StreamConfig(name=topic, subjects=[topic], storage=StorageType.FILE)
        deadline = asyncio.get_running_loop().time() + PREPARE_TIMEOUT_S
        while True:
            try:
                await self.js.stream_info(topic)
                return
            except NotFoundError:
                pass
            try:
                await self.js.add_stream(config)
                return
            except BadRequestError as e:
                if e.err_code != SUBJECTS_OVERLAP or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        futures = [await self.js.publish_async(topic, body) for body in bodies]
        return asyncio.gather(*futures)

    async def consume(self, topic: str, recorder: Recorder) -> None:
        config = ConsumerConfig(ack_policy=AckPolicy.ALL, deliver_policy=DeliverPolicy.ALL,
                                max_ack_pending=-1)
        sub = await self.js.pull_subscribe(topic, durable=CONSUMER_GROUP, config=config)
        recorder.ready.set()
        while not recorder.done.is_set():
            try:
                msgs = await sub.fetch(self.options.fetch_count, timeout=FETCH_TIMEOUT_S)
            except nats.errors.TimeoutError:
                continue
            recorder.add(m.data for m in msgs)
            await msgs[-1].ack()

    async def delete(self, topic: str) -> None:
        await self.js.delete_stream(topic)

    async def close(self) -> None:
        await self.nc.drain()
