"""The chaos run's clients (Skiff's Python client): producers that each send one sharding key's
values ``k<n>-0, k<n>-1, ...`` one at a time at a fixed rate through a hash selector (so a key
keeps its queue and its order), and two consumer groups reading the topic from its start,
one with an orderly listener and one with a concurrent listener. Every send's invoke and
answer, and every delivery, go into the history.

A value is sent once and never resent by the run (the client's own retries aside), as in
OpenChaos: a send answered other than SEND_OK is UNKNOWN or FAILURE, and its value may or
may not be delivered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from skiff.client import (AsyncAdmin, AsyncProducer, AsyncPushConsumer, ClientConfig, ConsumeOrderlyStatus,
                          ConsumeStatus, Message, SelectByHash, SendStatus)
from skiff.client.errors import ConnectFailed, NoRouteError, ResponseError, SendFailedError
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.testing.chaos.history import Event, HistoryWriter, Kind, Op, Result, now_ms

TOPIC = "ChaosTopic"
QUEUES = 8
ORDERLY_GROUP = "orderly"
CONCURRENT_GROUP = "concurrent"
FAST_CLIENT = {"rebalance_interval_ms": 1000, "poll_namesrv_interval_ms": 1000,
               "heartbeat_broker_interval_ms": 1000, "persist_consumer_offset_interval_ms": 300}
"""Client intervals short enough that a failover is seen within a fault's window (the
defaults are 20-30 s)."""
DEFINITE_REFUSALS = (ConnectFailed, NoRouteError, ResponseError)
"""Errors after which the message was certainly not stored: no connection was made, no
route, or the broker answered with a refusal."""


def client_config(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv, instance_name=name, **FAST_CLIENT)


def outcome_of(exc: BaseException) -> Result:
    """FAILURE when every attempt was refused before storing, else UNKNOWN."""
    if isinstance(exc, SendFailedError):
        definite = exc.attempts and all(isinstance(e, DEFINITE_REFUSALS) for _, e in exc.attempts)
        return Result.FAILURE if definite else Result.UNKNOWN
    return Result.FAILURE if isinstance(exc, DEFINITE_REFUSALS) else Result.UNKNOWN


async def create_topic(namesrv: str, deadline_s: float) -> None:
    """The topic on the group's master, retried until the master takes it and routes name it."""
    admin = AsyncAdmin(client_config=client_config(namesrv, "chaos-admin"))
    await admin.start()
    deadline = time.monotonic() + deadline_s
    try:
        while True:
            try:
                await admin.create_topic(TOPIC, queue_nums=QUEUES)
                await admin.topic_route(TOPIC)
                return
            except Exception:  # noqa: BLE001 - no master yet; retried to the deadline
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
    finally:
        await admin.shutdown()


class Producers:
    """``keys`` senders, together ``rate`` messages a second (each key its share)."""

    def __init__(self, namesrv: str, history: HistoryWriter, keys: int, rate: float) -> None:
        self.producer = AsyncProducer("chaos-producer", client_config=client_config(namesrv, "chaos-producer"),
                                      trace=False)
        self.history = history
        self.keys = [f"k{i}" for i in range(keys)]
        self.interval_s = keys / rate
        self.running = False
        self.acked = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self.producer.start()
        self.running = True
        self._tasks = [asyncio.create_task(self._run(i, key)) for i, key in enumerate(self.keys)]

    async def _run(self, index: int, key: str) -> None:
        client = f"p{index}"
        seq = 0
        next_at = time.monotonic() + self.interval_s * index / len(self.keys)
        while self.running:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at + self.interval_s, time.monotonic())
            await self._send(client, key, f"{key}-{seq}")
            seq += 1

    async def _send(self, client: str, key: str, value: str) -> None:
        started = now_ms()
        self.history.add(Event(client, Op.ENQUEUE, Kind.INVOKE, "", value, key, started))
        try:
            sent = await self.producer.send(Message.of(TOPIC, value, keys=key), selector=SelectByHash(), arg=key)
            ok = sent.send_status is SendStatus.SEND_OK
            result = Result.SUCCESS if ok else Result.UNKNOWN
            extra = (f"{sent.send_status.name} {sent.offset_msg_id} "  # the id names the storing broker and offset
                     f"q{sent.message_queue.queue_id}@{sent.queue_offset}")
        except Exception as exc:  # noqa: BLE001 - every failure is an outcome of the history
            result, extra = outcome_of(exc), f"{type(exc).__name__}: {exc}"[:300]
        answered = now_ms()
        self.acked += result is Result.SUCCESS
        self.history.add(Event(client, Op.ENQUEUE, Kind.RESPONSE, result, value, key, answered,
                               answered - started, extra))

    async def stop(self) -> None:
        self.running = False
        await asyncio.gather(*self._tasks)
        await self.producer.shutdown()


class Consumers:
    """An orderly and a concurrent push consumer, each its own group, both from the first offset."""

    def __init__(self, namesrv: str, history: HistoryWriter) -> None:
        self.history = history
        self.consumers = []
        for group, orderly in ((ORDERLY_GROUP, True), (CONCURRENT_GROUP, False)):
            consumer = AsyncPushConsumer(group, client_config=client_config(namesrv, f"chaos-{group}"), trace=False,
                                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            consumer.subscribe(TOPIC, "*")
            if orderly:
                consumer.register_orderly_listener(self._listener(group, ConsumeOrderlyStatus.SUCCESS))
            else:
                consumer.register_listener(self._listener(group, ConsumeStatus.CONSUME_SUCCESS))
            self.consumers.append(consumer)

    def _listener(self, group: str, status: Any) -> Any:
        def listen(msgs: list[Any], ctx: Any) -> Any:
            for m in msgs:
                value = bytes(m.body).decode()
                self.history.add(Event(group, Op.DEQUEUE, Kind.RESPONSE, Result.SUCCESS, value,
                                       value.rsplit("-", 1)[0], now_ms(), 0, f"q{m.queue_id}@{m.queue_offset}"))
            return status
        return listen

    async def start(self) -> None:
        for consumer in self.consumers:
            await consumer.start()

    async def stop(self) -> None:
        for consumer in self.consumers:
            await consumer.shutdown()
