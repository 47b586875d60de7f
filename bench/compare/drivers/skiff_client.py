"""Skiff through its own Python client (`skiff.client`).

Producer: `send_batch` of one batch per call (one frame, one append on the
broker), several batches in flight. Consumer: a LitePullConsumer in a
consumer group from the first offset, `poll` returning batches; offsets are
committed by the client on its own schedule.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable
from typing import Any

from bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder

POLL_TIMEOUT_MS = 1000
REGISTER_WAIT_S = 45.0
"""A broker registers with the NameServer right after it starts (then every 30 s)."""


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class SkiffDriver(Driver):
    how = ("skiff.client: Producer.send_batch per batch, a batch in flight per window slot; "
           "LitePullConsumer (consumer group, from the first offset) polling batches")

    async def connect(self) -> None:
        from skiff.client import Admin, Producer

        self.namesrv = self.endpoint["namesrv_addr"]
        self.admin = Admin(self.namesrv)
        await _maybe_await(getattr(self.admin, "start", lambda: None)())
        self.producer = Producer("bench-producer", namesrv_addr=self.namesrv)
        await self.producer.start()
        self.consumer: Any = None

    async def prepare(self, topic: str) -> None:
        """Create the topic, retrying while the new broker is not yet registered with the NameServer."""
        deadline = time.monotonic() + REGISTER_WAIT_S
        while True:
            try:
                await _maybe_await(self.admin.create_topic(topic, queue_nums=self.options.queues))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        from skiff.client import Message

        return asyncio.ensure_future(self.producer.send_batch([Message(topic, body) for body in bodies]))

    async def consume(self, topic: str, recorder: Recorder) -> None:
        from skiff.client import LitePullConsumer

        self.consumer = LitePullConsumer(CONSUMER_GROUP, namesrv_addr=self.namesrv)
        self.consumer.subscribe(topic, "*")
        await self.consumer.start()
        recorder.ready.set()
        while not recorder.done.is_set():
            msgs = await self.consumer.poll(POLL_TIMEOUT_MS)
            recorder.add(m.body for m in msgs)

    async def close(self) -> None:
        if self.consumer is not None:
            await self.consumer.shutdown()
        await self.producer.shutdown()
        await _maybe_await(getattr(self.admin, "close", lambda: None)())
