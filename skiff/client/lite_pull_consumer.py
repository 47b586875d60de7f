"""Lite pull consumers: `AsyncLitePullConsumer` (asyncio) and `LitePullConsumer`
(blocking, same methods) — the API a batch job or a Spark source wants.

Background pulls fill a buffer; `poll` takes from it. Queues come from
`subscribe` (shared out within the group by rebalance) or from `assign`
(exactly these queues, no group coordination). Offsets are committed with
`commit_sync` / `commit`, or every ``auto_commit_interval_ms`` by `poll`.

    consumer = LitePullConsumer("etl", "127.0.0.1:9876", auto_commit=False)
    consumer.assign(consumer.fetch_message_queues("Orders"))
    consumer.start()
    while batch := consumer.poll(1000):
        write(batch)
        consumer.commit_sync()
    consumer.shutdown()

docs/client.md ("Lite pull consumer") lists every option.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig
from skiff.client.credentials import Credentials
from skiff.client._impl.consumer_core import ConsumerSettings, Subscription
from skiff.client._impl.consumer_facade import AsyncConsumerBase, BlockingConsumerBase
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.lite_pull_impl import LitePullImpl, LitePullSettings
from skiff.client._impl.offset_store import ReadFrom
from skiff.client._impl.strategies import AllocateAverage, AllocateStrategy
from skiff.client._impl.trace_hooks import ConsumeTracer
from skiff.client.errors import ClientConfigError, ClientStateError
from skiff.client.results import MessageSelector
from skiff.client.trace import TraceSettings, trace_settings
from skiff.client._impl.lifecycle import ClientState
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere, MessageModel

__all__ = ["AsyncLitePullConsumer", "LitePullConsumer"]


class AsyncLitePullConsumer(AsyncConsumerBase):
    """Pull-style consumption: `poll` returns the next pulled batch of any held queue."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_mib: int = 100,
        pull_threshold_for_all: int = 10_000,
        poll_timeout_ms: int = 5000,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        offsets_dir: str | None = None,
        instance_name: str = DEFAULT_INSTANCE_NAME,
        client_config: ClientConfig | None = None,
        trace: bool | TraceSettings = True,
        credentials: Credentials | None = None,
    ) -> None:
        """``trace``: record what `poll` returns to the trace topic (docs/trace.md); False turns it off."""
        super().__init__(group, namesrv_addr, instance_name, client_config, credentials)
        self._tracer = ConsumeTracer(group, trace_settings(trace), self.client_config)
        if auto_commit_interval_ms < 1 or poll_timeout_ms < 0 or pull_threshold_for_all < 1:
            raise ClientConfigError("auto_commit_interval_ms and pull_threshold_for_all must be positive "
                                    "and poll_timeout_ms not negative")
        self.poll_timeout_ms = poll_timeout_ms
        self.settings = ConsumerSettings(
            message_model=message_model, consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms, allocate_strategy=allocate_strategy or AllocateAverage(),
            pull_batch_size=pull_batch_size, pull_threshold_for_queue=pull_threshold_for_queue,
            pull_threshold_size_for_queue_mib=pull_threshold_size_for_queue_mib, offsets_dir=offsets_dir,
        )
        self.lite = LitePullSettings(auto_commit, auto_commit_interval_ms, pull_threshold_for_all)
        self._impl: LitePullImpl | None = None
        self._subscriptions: dict[str, str | MessageSelector] = {}

    def _engine(self) -> LitePullImpl:
        """Made on first use (it needs the running loop), before or after start."""
        if self._state is ClientState.SHUT_DOWN:
            raise ClientStateError("the consumer is shut down")
        if self._impl is None:
            self._impl = LitePullImpl(self.group, self.client_config, self.settings, self.lite)
            for topic, expression in self._subscriptions.items():
                self._impl.subscribe(topic, expression)
        return self._impl

    def _running(self) -> LitePullImpl:
        if self._state is not ClientState.RUNNING or self._impl is None:
            raise ClientStateError(f"the consumer is {self._state}" + ("; call start() first"
                                                                       if self._state is ClientState.CREATED else ""))
        return self._impl

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Share ``topic``'s queues with the group's other members (before `start`)."""
        self._check_created("subscribe")
        Subscription.of(topic, expression)
        if self._impl is None:
            self._subscriptions[topic] = expression
        else:
            self._impl.subscribe(topic, expression)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (replacing an earlier assignment), from their committed offsets."""
        await self._engine().assign(list(queues))

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of ``topic`` (to `assign` some of them)."""
        instance = self._engine().instance
        return sorted(await instance.routes.subscribe_queues(topic))

    async def start(self) -> None:
        self._check_created("start")
        impl = self._engine()
        if impl.mode.value == "none":
            raise ClientStateError("subscribe() or assign() before start()")
        self._state = ClientState.RUNNING
        try:
            await self._tracer.start()
            await impl.start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        """Stop pulling, commit (with auto-commit) and leave the group."""
        impl, self._impl = self._impl, None
        self._state = ClientState.SHUT_DOWN
        if impl is not None:
            await impl.shutdown()
        await self._tracer.close()

    async def poll(self, timeout_ms: int | None = None) -> list[StoredMessage]:
        """The next pulled batch, waiting up to ``timeout_ms`` (default ``poll_timeout_ms``); [] if none came."""
        msgs = await self._running().poll(self.poll_timeout_ms if timeout_ms is None else timeout_ms)
        self._tracer.polled(msgs)
        return msgs

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer holds now."""
        return set(self._impl.queues) if self._impl is not None else set()

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` next; it must lie between the queue's min and max offsets."""
        impl = self._running()
        if mq not in impl.queues:
            raise ClientStateError(f"{mq} is not assigned to this consumer")
        low, high = await self._bounds(mq)
        if not low <= offset <= high:
            raise ClientConfigError(f"offset {offset} of {mq} is outside its range [{low}, {high}]")
        impl.seek_unchecked(mq, offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._bounds(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._bounds(mq))[1])

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of ``mq``'s first message stored at or after ``timestamp_ms``."""
        instance = self._engine().instance
        return await instance.api.search_offset(await _master(instance, mq), mq, timestamp_ms)

    async def _bounds(self, mq: MessageQueue) -> tuple[int, int]:
        instance = self._engine().instance
        addr = await _master(instance, mq)
        return await instance.api.get_min_offset(addr, mq), await instance.api.get_max_offset(addr, mq)

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` as the store has it (-1: none)."""
        return await self._running().core.offset_store.read(mq, ReadFrom.STORE)

    async def commit_sync(self) -> None:
        await self._running().commit_sync()

    async def commit(self, offsets: dict[MessageQueue, int]) -> None:
        await self._running().commit(offsets)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues, and `poll` returns none of their messages until `resume`."""
        self._running().pause(list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._running().resume(list(queues))


async def _master(instance: ClientInstance, mq: MessageQueue) -> str:
    if instance.routes.broker_data(mq.broker_name) is None:
        await instance.routes.route(mq.topic)
    return instance.routes.find_broker_addr(mq.broker_name)


class LitePullConsumer(BlockingConsumerBase[AsyncLitePullConsumer]):
    """The blocking `AsyncLitePullConsumer`: same constructor and methods."""

    def __init__(self, group: str, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncLitePullConsumer(group, namesrv_addr, **options))

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._async.subscribe(topic, expression)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        self._run(self._async.assign(list(queues)))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._async.fetch_message_queues(topic))

    def poll(self, timeout_ms: int | None = None) -> list[StoredMessage]:
        return self._run(self._async.poll(timeout_ms))

    def assignment(self) -> set[MessageQueue]:
        return self._thread.call(self._async.assignment)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._async.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._async.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._async.seek_to_end(mq))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._async.offset_for_timestamp(mq, timestamp_ms))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self._async.committed(mq))

    def commit_sync(self) -> None:
        self._run(self._async.commit_sync())

    def commit(self, offsets: dict[MessageQueue, int]) -> None:
        self._run(self._async.commit(offsets))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._thread.call(lambda: self._async.pause(list(queues)))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._thread.call(lambda: self._async.resume(list(queues)))
