"""RabbitMQ streams through rstream (the stream protocol, not AMQP).

Producer: `send_batch` of raw bodies with a publish-confirm callback; a batch
is done when every message in it is confirmed. Consumer: a named subscriber
from the first offset with the default credit, storing its offset once per
batch of messages received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from rstream import ConfirmationStatus, Consumer, ConsumerOffsetSpecification, MessageContext, OffsetType, Producer

from skiff.bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder

USERNAME, PASSWORD = "guest", "guest"


class RabbitStreamDriver(Driver):
    how = ("rstream: send_batch of raw bodies with publish confirms (a batch done when all are confirmed); "
           "subscriber from the first offset, default credit, store_offset once per fetch-size run of messages")

    async def connect(self) -> None:
        self.producer = Producer(self.endpoint["host"], port=self.endpoint["stream_port"],
                                 username=USERNAME, password=PASSWORD)
        await self.producer.start()
        self.consumer: Consumer | None = None

    async def prepare(self, topic: str) -> None:
        await self.producer.create_stream(topic, exists_ok=True)

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        left = len(bodies)

        def on_confirm(status: ConfirmationStatus) -> None:
            nonlocal left
            if not status.is_confirmed and not done.done():
                done.set_exception(RuntimeError(f"stream publish refused, code {status.response_code}"))
            left -= 1
            if left == 0 and not done.done():
                done.set_result(None)

        await self.producer.send_batch(topic, bodies, on_publish_confirm=on_confirm)
        return done

    async def consume(self, topic: str, recorder: Recorder) -> None:
        self.consumer = Consumer(self.endpoint["host"], port=self.endpoint["stream_port"],
                                 username=USERNAME, password=PASSWORD)
        await self.consumer.start()
        every, since_store = self.options.fetch_count, 0

        async def on_message(body: bytes, ctx: MessageContext) -> None:
            nonlocal since_store
            recorder.add((body,))
            since_store += 1
            if since_store >= every:
                since_store = 0
                await ctx.consumer.store_offset(topic, CONSUMER_GROUP, ctx.offset)

        await self.consumer.subscribe(topic, on_message, subscriber_name=CONSUMER_GROUP,
                                      offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
        recorder.ready.set()
        await recorder.done.wait()

    async def delete(self, topic: str) -> None:
        await self.producer.delete_stream(topic, missing_ok=True)

    async def close(self) -> None:
        if self.consumer is not None:
            await self.consumer.close()
        await self.producer.close()
