"""Producers: `AsyncProducer` (asyncio) and `Producer` (blocking, same methods).

    async with AsyncProducer("orders-producer", "127.0.0.1:9876") as producer:
        result = await producer.send(Message.of("Orders", b"...", tags="created", keys="order-17"))
        await producer.send(msg, selector=SelectByHash(), arg="order-17")   # ordered per key
        results = await producer.send_batch([...])                          # split to the limits

    producer = Producer("orders-producer", "127.0.0.1:9876"); producer.start()
    producer.send(Message.of("Orders", "hello")); producer.shutdown()

docs/client.md ("Producer") lists every option and what each send does on failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from typing import Any

from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig, client_config_for
from skiff.client.credentials import Credentials
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.lifecycle import AsyncClient, ClientState
from skiff.client._impl.producer_impl import ProducerCore, ProducerOptions
from skiff.client._impl.selectors import QueueSelector, SelectByHash, SelectRandom, SelectRoundRobin
from skiff.client._impl.trace_hooks import SendTracer
from skiff.client.blocking import BlockingGroupClient, mirror
from skiff.client.errors import ClientStateError
from skiff.client.results import SendResult
from skiff.client.trace import TraceSettings, TraceStats, trace_settings
from skiff.common.limits import COMPRESS_BODY_OVER_BYTES, MESSAGE_MAX_BYTES
from skiff.common.message import Message, MessageQueue

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | None, BaseException | None], None]
"""Called once with (result, None) or (None, error) when an async send ends."""

__all__ = ["AsyncProducer", "Producer", "SelectByHash", "SelectRandom", "SelectRoundRobin", "SendCallback"]


class AsyncProducer(AsyncClient):
    """Sends messages for one producer group; `start` before sending, `shutdown` after."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        send_timeout_ms: int = 3000,
        retry_times_when_send_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_body_over_bytes: int = COMPRESS_BODY_OVER_BYTES,
        max_message_size: int = MESSAGE_MAX_BYTES,
        latency_fault_enabled: bool = True,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_config: ClientConfig | None = None,
        trace: bool | TraceSettings = True,
        credentials: Credentials | None = None,
    ) -> None:
        """``trace``: record every send to the trace topic (docs/trace.md); False turns it off."""
        self.options = ProducerOptions(
            group, send_timeout_ms, retry_times_when_send_failed, retry_another_broker_when_not_store_ok,
            compress_body_over_bytes, max_message_size, latency_fault_enabled,
        )
        self.client_config = client_config_for(namesrv_addr, instance_name, client_config, credentials)
        self._tracer = SendTracer(group, trace_settings(trace), self.client_config)
        self._core: ProducerCore | None = None
        self._state = ClientState.CREATED

    @property
    def group(self) -> str:
        return self.options.group

    @property
    def client_id(self) -> str | None:
        return self._core.instance.client_id if self._core is not None else None

    async def start(self) -> None:
        """Join the process's client instance for these NameServers and register the group."""
        if self._state is not ClientState.CREATED:
            raise ClientStateError(f"the producer is {self._state}; make a new one to start again")
        instance = ClientInstance.get(self.client_config)
        instance.register_producer(self.group, self)
        self._core = ProducerCore(self.options, instance)
        self._state = ClientState.RUNNING
        await instance.start()
        await self._tracer.start()
        await instance.heartbeat_all_brokers()

    async def shutdown(self) -> None:
        """Unregister the group from the brokers; the instance closes with its last user."""
        if self._state is not ClientState.RUNNING or self._core is None:
            self._state = ClientState.SHUT_DOWN
            return
        self._state = ClientState.SHUT_DOWN
        await self._tracer.close()
        await self._core.instance.unregister_producer(self.group)
        await self._core.instance.shutdown()

    def _running(self) -> ProducerCore:
        if self._state is not ClientState.RUNNING or self._core is None:
            raise ClientStateError(f"the producer is {self._state}; call start() first" if self._state is ClientState.CREATED
                                   else f"the producer is {self._state}")
        return self._core

    async def send(self, msg: Message, *, queue: MessageQueue | None = None, selector: QueueSelector | None = None,
                   arg: Any = None, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer.

        Without ``queue`` or ``selector`` a failed attempt is retried on another
        broker (``retry_times_when_send_failed`` times) and `SendFailedError`
        lists every attempt. With either, the message goes to that queue once
        and its failure is raised as it is: retrying elsewhere would break order.
        Either way, while the group has no master (a failover) the send waits for
        one within ``timeout_ms``, then raises `NoMasterError` saying so.
        """
        core = self._running()
        return await self._tracer.timed(msg, core.send(core.prepare(msg), msg=msg, queue=queue, selector=selector,
                                                       arg=arg, timeout_ms=timeout_ms))

    def send_async(self, msg: Message, callback: SendCallback | None = None, *,
                   queue: MessageQueue | None = None, selector: QueueSelector | None = None, arg: Any = None,
                   timeout_ms: int | None = None) -> asyncio.Task[SendResult]:
        """Start a send and return its task; ``callback(result, error)`` runs when it ends.

        The message is checked now (a bad one raises here, not in the task).
        """
        core = self._running()
        prepared = core.prepare(msg)
        task = asyncio.ensure_future(self._tracer.timed(msg, core.send(prepared, msg=msg, queue=queue,
                                                                       selector=selector, arg=arg,
                                                                       timeout_ms=timeout_ms)))
        if callback is not None:
            task.add_done_callback(lambda t: _call_back(callback, t))
        return task

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                          selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for (or getting) an answer; one attempt."""
        core = self._running()
        await core.send_oneway(core.prepare(msg), msg=msg, queue=queue, selector=selector, arg=arg)

    async def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout_ms: int | None = None) -> list[SendResult]:
        """Send messages of one topic as few SEND_BATCH_MESSAGE requests as the limits allow
        (``max_message_size`` bytes and 4096 messages each), one after the other.

        Returns one `SendResult` per request; each holds its messages' ids comma-joined
        (``result.msg_ids``) and the first one's queue offset (the rest follow it).
        """
        core = self._running()
        chunks = core.prepare_batch(msgs)
        return await self._tracer.timed_batch(msgs, (await core.send(c, queue=queue, timeout_ms=timeout_ms)
                                                     for c in chunks))

    async def send_encoded_batch(self, topic: str, body: bytes, msg_ids: Sequence[str], *,
                                 queue: MessageQueue | None = None, timeout_ms: int | None = None) -> SendResult:
        """Send one batch body already encoded in `skiff.protocol.message_codec`'s batch format
        (each record's properties holding its UNIQ_KEY, ``msg_ids`` in record order) as one
        SEND_BATCH_MESSAGE, with `send`'s retries unless ``queue`` pins it.

        For writers that encode many messages column-wise (the Spark sink) rather than
        through a `Message` each. The caller has checked each record (sizes, properties);
        the body's size is checked here. It is not traced: the tracer reads messages.
        """
        core = self._running()
        return await core.send(core.prepare_encoded_batch(topic, body, msg_ids), queue=queue, timeout_ms=timeout_ms)

    def trace_stats(self) -> TraceStats | None:
        """This producer's trace counters (None when it does not trace)."""
        return self._tracer.stats()



def _call_back(callback: SendCallback, task: asyncio.Task[SendResult]) -> None:
    try:
        if task.cancelled():
            callback(None, asyncio.CancelledError())
        elif task.exception() is not None:
            callback(None, task.exception())
        else:
            callback(task.result(), None)
    except Exception:
        log.exception("a send callback failed")


@mirror(AsyncProducer, "send", "send_oneway", "send_batch", "send_encoded_batch")
class Producer(BlockingGroupClient[AsyncProducer]):
    """The blocking `AsyncProducer`: same constructor, same methods, run on the shared client loop.

    ``send_async`` returns a `concurrent.futures.Future`; its callback runs on the
    client loop's thread and must not block.
    """

    def __init__(self, group: str, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncProducer(group, namesrv_addr, **options))

    def send_async(self, msg: Message, callback: SendCallback | None = None, *,
                   queue: MessageQueue | None = None, selector: QueueSelector | None = None, arg: Any = None,
                   timeout_ms: int | None = None) -> concurrent.futures.Future[SendResult]:
        async def started() -> asyncio.Task[SendResult]:
            return self._async.send_async(msg, callback, queue=queue, selector=selector, arg=arg,
                                          timeout_ms=timeout_ms)

        task = self._run(started())
        return self._submit(_await(task))

    def trace_stats(self) -> TraceStats | None:
        return self._async.trace_stats()


async def _await(task: asyncio.Task[SendResult]) -> SendResult:
    return await task
