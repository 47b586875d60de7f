"""Skiff through its own Python client (`skiff.client`, the asyncio classes).

Producer: `AsyncProducer.send_batch` of one batch per call (one
SEND_BATCH_MESSAGE frame, one append on the broker), several batches in
flight; a batch of one is `AsyncProducer.send` (SEND_MESSAGE_V2, one message
per request, what a RocketMQ application sends). Consumer: an
`AsyncLitePullConsumer` in a consumer group from the first offset with
pull_batch_size = the fetch size, `poll` returning batches; offsets
are committed by the client's auto-commit. Message trace (on by default in
Skiff's client) is off in both: no peer records one, and it would double the
messages the broker stores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

from skiff.client import AsyncAdmin, AsyncLitePullConsumer, AsyncProducer, ClientConfig, ConsumeFromWhere, Message

from skiff.bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder

POLL_TIMEOUT_MS = 1000
REGISTER_WAIT_S = 45.0
"""A broker registers with the NameServer right after it starts (then every 30 s)."""

ADMIN_TIMEOUT_MS = 60_000
"""The broker answers a topic deletion once its files are gone: a second or more per 1,024 written queues."""


def new_admin(namesrv: str) -> AsyncAdmin:
    """The admin client that creates and deletes the bench's topics (also for the Kafka driver)."""
    return AsyncAdmin(client_config=ClientConfig(namesrv, request_timeout_ms=ADMIN_TIMEOUT_MS))


async def create_topic(admin: AsyncAdmin, topic: str, queues: int) -> None:
    """Create the topic, retrying while the new broker is not yet registered with the NameServer."""
    deadline = time.monotonic() + REGISTER_WAIT_S
    while True:
        try:
            await admin.create_topic(topic, queue_nums=queues)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


def new_consumer(namesrv: str, topic: str, fetch: int) -> AsyncLitePullConsumer:
    """The bench's consumer of ``topic`` (not started): the one every Skiff e2e run uses."""
    consumer = AsyncLitePullConsumer(
        CONSUMER_GROUP, namesrv, pull_batch_size=fetch,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, trace=False)
    consumer.subscribe(topic, "*")
    return consumer


class SkiffDriver(Driver):
    how = ("skiff.client: AsyncProducer.send_batch per batch (AsyncProducer.send, SEND_MESSAGE_V2, for a batch "
           "of one), a batch in flight per window slot; "
           "AsyncLitePullConsumer (consumer group, from the first offset, pull_batch_size=fetch) polling batches; "
           "message trace off in both (no peer records one)")

    async def connect(self) -> None:
        self.namesrv = self.endpoint["namesrv_addr"]
        self.admin = new_admin(self.namesrv)
        await self.admin.start()
        self.producer = AsyncProducer("bench-producer", self.namesrv, trace=False)
        await self.producer.start()
        self.consumer: AsyncLitePullConsumer | None = None

    async def prepare(self, topic: str) -> None:
        await create_topic(self.admin, topic, self.options.queues)

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        if len(bodies) == 1:  # one message per request: SEND_MESSAGE_V2, as DefaultMQProducer.send(msg)
            return asyncio.ensure_future(self.producer.send(Message(topic, bodies[0])))
        return asyncio.ensure_future(self.producer.send_batch([Message(topic, body) for body in bodies]))

    async def consume(self, topic: str, recorder: Recorder) -> None:
        self.consumer = new_consumer(self.namesrv, topic, self.options.fetch_count)
        await self.consumer.start()
        recorder.ready.set()
        while not recorder.done.is_set():
            msgs = await self.consumer.poll(POLL_TIMEOUT_MS)
            recorder.add(m.body for m in msgs)

    async def delete(self, topic: str) -> None:
        await self.admin.delete_topic(topic)

    async def close(self) -> None:
        if self.consumer is not None:
            await self.consumer.shutdown()
        await self.producer.shutdown()
        await self.admin.shutdown()
