"""A RabbitMQ quorum queue through pika's asyncio connection adapter (AMQP 0-9-1).

Producer: persistent `basic_publish` on a channel in confirm mode; the
broker's (often multiple) acks complete each batch. Consumer: `basic_consume`
with prefetch = batch and a multiple ack every half prefetch.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import pika
from pika.adapters.asyncio_connection import AsyncioConnection
from pika.channel import Channel
from pika.spec import Basic

from skiff.bench.compare.drivers.base import Driver, Recorder

PERSISTENT = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
QUORUM = {"x-queue-type": "quorum"}


class _Batch:
    __slots__ = ("remaining", "future")

    def __init__(self, n: int, future: asyncio.Future[None]) -> None:
        self.remaining = n
        self.future = future


class RabbitQuorumDriver(Driver):
    how = ("pika AsyncioConnection: persistent basic_publish in confirm mode (batch done on its acks); "
           "basic_consume with prefetch=fetch, multiple ack every fetch/2")

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[Any] = loop.create_future()
        params = pika.ConnectionParameters(host=self.endpoint["host"], port=self.endpoint["amqp_port"])
        self.conn = AsyncioConnection(
            params,
            on_open_callback=lambda c: opened.set_result(c),
            on_open_error_callback=lambda _c, exc: opened.set_exception(RuntimeError(f"AMQP open failed: {exc}")),
            custom_ioloop=loop,
        )
        await opened
        self.channel: Channel = await _await_callback(lambda cb: self.conn.channel(on_open_callback=cb))
        self._outstanding: OrderedDict[int, _Batch] = OrderedDict()
        self._next_tag = 1
        await _await_callback(lambda cb: self.channel.confirm_delivery(self._on_confirm, callback=cb))

    async def prepare(self, topic: str) -> None:
        await _await_callback(lambda cb: self.channel.queue_declare(topic, durable=True, arguments=QUORUM, callback=cb))

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        batch = _Batch(len(bodies), asyncio.get_running_loop().create_future())
        publish, outstanding, tag = self.channel.basic_publish, self._outstanding, self._next_tag
        for body in bodies:
            publish("", topic, body, PERSISTENT)
            outstanding[tag] = batch
            tag += 1
        self._next_tag = tag
        return batch.future

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        tags = self._confirmed_tags(method.delivery_tag, method.multiple)
        failed = isinstance(method, Basic.Nack)
        for batch in tags:
            batch.remaining -= 1
            if batch.future.done():
                continue
            if failed:
                batch.future.set_exception(RuntimeError("quorum queue publish nacked"))
            elif batch.remaining == 0:
                batch.future.set_result(None)

    def _confirmed_tags(self, tag: int, multiple: bool) -> list[_Batch]:
        outstanding = self._outstanding
        if not multiple:
            batch = outstanding.pop(tag, None)
            return [batch] if batch is not None else []
        out = []
        while outstanding and next(iter(outstanding)) <= tag:
            out.append(outstanding.popitem(last=False)[1])
        return out

    async def consume(self, topic: str, recorder: Recorder) -> None:
        prefetch = self.options.fetch_count
        ack_every, unacked = max(1, prefetch // 2), 0
        await _await_callback(lambda cb: self.channel.basic_qos(prefetch_count=prefetch, callback=cb))

        def on_message(ch: Channel, method: Basic.Deliver, _props: Any, body: bytes) -> None:
            nonlocal unacked
            recorder.add((body,))
            unacked += 1
            if unacked >= ack_every or recorder.done.is_set():
                ch.basic_ack(method.delivery_tag, multiple=True)
                unacked = 0

        self.channel.basic_consume(topic, on_message, auto_ack=False)
        recorder.ready.set()
        await recorder.done.wait()

    async def delete(self, topic: str) -> None:
        await _await_callback(lambda cb: self.channel.queue_delete(topic, callback=cb))

    async def close(self) -> None:
        if self.conn.is_open:
            closed = asyncio.get_running_loop().create_future()

            def on_closed(*_: Any) -> None:
                if not closed.done():
                    closed.set_result(None)

            self.conn.add_on_close_callback(on_closed)
            self.conn.close()
            await asyncio.wait_for(closed, 10)


async def _await_callback(start: Callable[[Callable[..., None]], Any]) -> Any:
    """Run a pika call that reports completion through a callback, and await it."""
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def on_done(*args: Any) -> None:
        if not fut.done():
            fut.set_result(args[0] if args else None)

    start(on_done)
    return await fut
