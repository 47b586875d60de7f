"""Push consumers: `AsyncPushConsumer` (asyncio) and `PushConsumer` (blocking, same methods).

The consumer pulls in the background (long polling) and calls a listener with
batches of messages; what the listener answers decides commit or retry.

    def on_messages(msgs, ctx):
        for m in msgs:
            handle(m.topic, m.tags, m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("orders-consumer", "127.0.0.1:9876")
    consumer.subscribe("Orders", "created || paid")
    consumer.register_listener(on_messages)          # or register_orderly_listener(...)
    consumer.start()
    ...
    consumer.shutdown()                              # finishes what is running, commits, leaves

docs/client.md ("Push consumer") lists every option.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig
from skiff.client.credentials import Credentials
from skiff.client._impl.consumer_core import ConsumerSettings, Subscription
from skiff.client._impl.consumer_facade import AsyncConsumerBase, BlockingConsumerBase
from skiff.client._impl.consumer_impl import PushConsumerImpl
from skiff.client._impl.listener import ConcurrentListener, OrderlyListener
from skiff.client._impl.strategies import AllocateAverage, AllocateStrategy
from skiff.client.errors import ClientConfigError, ClientStateError
from skiff.client._impl.trace_hooks import ConsumeTracer
from skiff.client.results import MessageSelector
from skiff.client.trace import TraceSettings, trace_settings
from skiff.client._impl.lifecycle import ClientState
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, MessageModel

__all__ = ["AsyncPushConsumer", "PushConsumer"]


class AsyncPushConsumer(AsyncConsumerBase):
    """A consumer group member that delivers messages to a listener.

    Subscribe and register one listener before `start`. A listener may be a plain
    function (run on a pool of ``consume_thread_max`` threads) or an ``async def``
    (run on the event loop, at most ``consume_thread_max`` batches at once).
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = 16,
        suspend_current_queue_time_ms: int = 1000,
        await_termination_ms: int = 5000,
        offsets_dir: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_config: ClientConfig | None = None,
        trace: bool | TraceSettings = True,
        credentials: Credentials | None = None,
    ) -> None:
        """``trace``: record every consumption to the trace topic (docs/trace.md); False turns it off."""
        super().__init__(group, namesrv_addr, instance_name, client_config, credentials)
        self._tracer = ConsumeTracer(group, trace_settings(trace), self.client_config)
        self.settings = ConsumerSettings(
            message_model, consume_from_where, consume_timestamp_ms, allocate_strategy or AllocateAverage(),
            consume_thread_min, consume_thread_max, consume_message_batch_max_size, pull_batch_size,
            pull_threshold_for_queue, pull_threshold_size_for_queue_mib, consume_concurrently_max_span,
            max_reconsume_times, suspend_current_queue_time_ms, await_termination_ms, offsets_dir,
        )
        self._subscriptions: dict[str, str | MessageSelector] = {}
        self._listener: Callable[..., Any] | None = None
        self._orderly = False
        self._impl: PushConsumerImpl | None = None

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Take ``topic``'s messages that match ``expression``: ``"*"``, ``"TagA || TagB"``
        or a `MessageSelector` (``MessageSelector.by_sql("a > 5")``). Checked here."""
        self._check_created("subscribe")
        Subscription.of(topic, expression)
        self._subscriptions[topic] = expression

    def register_listener(self, listener: ConcurrentListener) -> None:
        """``listener(msgs, ctx) -> ConsumeStatus``, called concurrently for batches of any queue."""
        self._set_listener(listener, orderly=False)

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        """``listener(msgs, ctx) -> ConsumeOrderlyStatus``, called for one queue at a time, in order."""
        self._set_listener(listener, orderly=True)

    def _set_listener(self, listener: Callable[..., Any], *, orderly: bool) -> None:
        self._check_created("register a listener")
        if not callable(listener):
            raise ClientConfigError(f"the listener must be callable, not {listener!r}")
        self._listener = listener
        self._orderly = orderly

    async def start(self) -> None:
        """Join the group: from here on the listener gets messages of the queues this member holds."""
        self._check_created("start")
        if self._listener is None:
            raise ClientStateError("register a listener before start()")
        if not self._subscriptions:
            raise ClientStateError("subscribe to a topic before start()")
        self._impl = PushConsumerImpl(self.group, self.client_config, self.settings,
                                      self._tracer.wrap(self._listener), orderly=self._orderly,
                                      subscriptions=self._subscriptions.items())
        self._state = ClientState.RUNNING
        try:
            await self._tracer.start()
            await self._impl.start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        """Stop pulling, let running listener calls end (up to ``await_termination_ms``),
        commit what was consumed, release the queues and leave the group."""
        impl, self._impl = self._impl, None
        self._state = ClientState.SHUT_DOWN
        if impl is not None:
            await impl.shutdown()
        await self._tracer.close()

    def running_info(self) -> ConsumerRunningInfo:
        """What this member holds and how it is doing (GET_CONSUMER_RUNNING_INFO's answer)."""
        if self._impl is None:
            raise ClientStateError(f"the consumer is {self._state}")
        return self._impl.running_info()


class PushConsumer(BlockingConsumerBase[AsyncPushConsumer]):
    """The blocking `AsyncPushConsumer`: same constructor and methods. Plain-function
    listeners run on the consumer's thread pool, never on the shared client loop."""

    def __init__(self, group: str, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncPushConsumer(group, namesrv_addr, **options))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._async.subscribe(topic, expression)

    def register_listener(self, listener: ConcurrentListener) -> None:
        self._async.register_listener(listener)

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        self._async.register_orderly_listener(listener)

    def running_info(self) -> ConsumerRunningInfo:
        return self._thread.call(self._async.running_info)
