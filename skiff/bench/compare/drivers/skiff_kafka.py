"""Skiff through its Kafka listener, driven by librdkafka (confluent-kafka), the Kafka client
`skiff bench kafka` uses, with the same configurations (`skiff.bench.kafka`).

Producer: `Producer.produce` of every message of a batch, each to the next partition in turn
(round robin over the topic's queues, as Skiff's own producer spreads its sends); the batch's
awaitable completes when librdkafka has delivered every message of it (acks=all). A thread
calls `poll` to run the delivery callbacks. Batched shape: librdkafka's defaults (linger 5 ms,
batches up to 1 MB): it packs the window's messages into its own batches. Single shape (a
batch of one): linger.ms=0 and batch.num.messages=1, so every ProduceRequest carries one
record, with the worker's window of messages in flight — librdkafka's counterpart of a
RocketMQ application's `send(msg)`.

Consumer: a librdkafka `Consumer` assigned every partition from offset 0 (no group
coordination, nothing committed), `consume(fetch)` in a thread; librdkafka prefetches by
bytes on its own (its defaults), so the fetch size is how many messages one call hands over.
Topics are created and deleted through Skiff's admin client, with the run's queue count as
the partition count.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from skiff.bench.compare.drivers.base import CONSUMER_GROUP, Driver, Recorder
from skiff.bench.compare.drivers.skiff_client import create_topic, new_admin
from skiff.bench.kafka import assign_from_start, consumer_config, producer_config

POLL_S = 0.05
"""How long the delivery thread's `poll` blocks; callbacks run as soon as a delivery lands."""
CONSUME_S = 0.5
CLOSE_FLUSH_S = 30.0


class _Batch:
    """One publish call's future, settled once every message of it is delivered (or one fails)."""

    __slots__ = ("loop", "future", "left")

    def __init__(self, loop: asyncio.AbstractEventLoop, n: int) -> None:
        self.loop, self.future, self.left = loop, loop.create_future(), n

    def delivered(self, err: KafkaError | None, _msg: Message) -> None:
        """Runs on the poll thread."""
        if err is not None:
            self.left = -1
            self.loop.call_soon_threadsafe(_settle, self.future, KafkaException(err))
            return
        self.left -= 1
        if self.left == 0:
            self.loop.call_soon_threadsafe(_settle, self.future, None)


def _settle(future: asyncio.Future[None], exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


class SkiffKafkaDriver(Driver):
    how = ("confluent-kafka (librdkafka) against Skiff's Kafka listener: Producer.produce per message, "
           "round robin over the partitions, a thread polling delivery callbacks; batched shape with "
           "librdkafka's defaults (linger 5 ms, acks=all), single shape linger.ms=0 and batch.num.messages=1 "
           "(one record per ProduceRequest); Consumer assigned every partition from offset 0, consume(fetch) "
           "in a thread, no commits")

    async def connect(self) -> None:
        self.bootstrap = self.endpoint["kafka_bootstrap"]
        self.admin = new_admin(self.endpoint["namesrv_addr"])
        await self.admin.start()
        self.producer = Producer(producer_config(self.bootstrap, one_per_request=self.options.batch == 1))
        self._next_partition = 0
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kafka-poll", daemon=True)
        self._poller.start()
        self.consumer: Consumer | None = None

    def _poll(self) -> None:
        while not self._closing.is_set():
            self.producer.poll(POLL_S)

    async def prepare(self, topic: str) -> None:
        await create_topic(self.admin, topic, self.options.queues)

    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        batch = _Batch(asyncio.get_running_loop(), len(bodies))
        partitions = self.options.queues
        for body in bodies:
            while True:
                try:
                    self.producer.produce(topic, body, partition=self._next_partition, on_delivery=batch.delivered)
                    break
                except BufferError:  # librdkafka's queue is full: the poll thread drains it
                    await asyncio.sleep(POLL_S)
            self._next_partition = (self._next_partition + 1) % partitions
        return batch.future

    async def consume(self, topic: str, recorder: Recorder) -> None:
        self.consumer = consumer = Consumer(consumer_config(self.bootstrap, CONSUMER_GROUP))
        assign_from_start(consumer, topic, self.options.queues)
        recorder.ready.set()
        fetch = self.options.fetch_count
        while not recorder.done.is_set():
            msgs = await asyncio.to_thread(consumer.consume, fetch, CONSUME_S)
            bodies: list[bytes] = []
            for msg in msgs:
                err, value = msg.error(), msg.value()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                elif value is not None:
                    bodies.append(value)
            recorder.add(bodies)

    async def delete(self, topic: str) -> None:
        await self.admin.delete_topic(topic)

    async def close(self) -> None:
        if self.consumer is not None:
            await asyncio.to_thread(self.consumer.close)
        await asyncio.to_thread(self.producer.flush, CLOSE_FLUSH_S)
        self._closing.set()
        self._poller.join()
        await self.admin.shutdown()
