"""The low-level pull client: read a given queue from a given offset, nothing more.

No rebalance, no offset commits: the caller owns the offsets (a Spark executor
reading an assigned range, a tool dumping a queue). RocketMQ's
DefaultMQPullConsumer minus its offset store. Pulls name ``group``; a caller that
reads for a group of its own may also `join` it (the brokers then list this
client among the group's members, from its heartbeats) and trace what it
consumed (``trace=True``, then `consumed`), as `skiff consume -g GROUP` does.

    async with AsyncPullClient("127.0.0.1:9876") as client:
        for mq in await client.fetch_subscribe_queues("Orders"):
            result = await client.pull(mq, 0, 32, sub_expression="created || paid")
            ... result.messages, result.next_begin_offset ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig, client_config_for
from skiff.client.credentials import Credentials
from skiff.client._impl.consumer_core import Subscription
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.lifecycle import AsyncClient
from skiff.client._impl.pull_api import LONG_POLL_EXTRA_MS, SUSPEND_TIMEOUT_MS, Puller, pull_sys_flag
from skiff.client._impl.trace_hooks import ConsumeTracer
from skiff.client.blocking import BlockingClient, mirror
from skiff.client.errors import ClientStateError, MessageValidationError, ResponseError
from skiff.client.results import MessageSelector, PullResult, RawPullResult
from skiff.client.trace import TraceSettings, trace_settings
from skiff.common.message import MessageQueue
from skiff.common.names import group_error
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo
from skiff.protocol.bodies.heartbeat import (
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
)

log = logging.getLogger(__name__)

PULL_CLIENT_GROUP = "SKIFF_PULL_CLIENT"
"""The consumer group pulls name when the caller gives none (brokers require one)."""
ResetListener = Callable[[str, dict[MessageQueue, int]], None]
"""Called with a topic and its new queue offsets when an admin resets a joined group's offsets."""
PULL_TIMEOUT_MS = 10_000
"""RocketMQ's consumerPullTimeoutMillis."""
MAX_NUMS_LIMIT = 1024


class AsyncPullClient(AsyncClient):
    """Pulls queues by offset; every call names the queue and the offset."""

    def __init__(self, namesrv_addr: str = "", *, group: str = PULL_CLIENT_GROUP,
                 instance_name: str = DEFAULT_INSTANCE_NAME, client_config: ClientConfig | None = None,
                 credentials: Credentials | None = None, trace: bool | TraceSettings = False) -> None:
        """``group``: the consumer group every pull names (brokers count and label pulls by it).
        ``trace``: record what the caller reports with `consumed` to the trace topic (docs/trace.md)."""
        problem = group_error(group)
        if problem:
            raise MessageValidationError(f"pull group: {problem}")
        self.group = group
        self.client_config = client_config_for(namesrv_addr, instance_name, client_config, credentials)
        self._tracer = ConsumeTracer(group, trace_settings(trace), self.client_config)
        self._member: _PullMember | None = None
        self._instance: ClientInstance | None = None
        self._puller: Puller | None = None

    async def start(self) -> None:
        if self._instance is not None:
            raise ClientStateError("the pull client is already started")
        self._instance = ClientInstance.get(self.client_config)
        await self._instance.start()
        self._puller = Puller(self._instance.api, self._instance.routes)
        try:
            await self._tracer.start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        instance, self._instance, self._puller = self._instance, None, None
        member, self._member = self._member, None
        await self._tracer.close()
        if instance is not None:
            if member is not None:
                await instance.unregister_consumer(self.group)
            await instance.shutdown()

    async def join(self, topic: str, expression: str | MessageSelector = SUB_ALL, *,
                   on_reset: ResetListener | None = None) -> None:
        """Be a member of ``group`` reading ``topic``: a pull consumer (CONSUME_ACTIVELY) in the
        heartbeats to every broker of the routes known, now and until `shutdown`, so the brokers
        list this client among the group's connections (and push consumers of the group count
        it when they share out queues, as RocketMQ's pull consumer). It rebalances nothing and
        keeps no offsets; ``on_reset`` hears an admin's offset reset of the group.
        A broker's refusal of the subscription (SQL92 on a broker without property filtering)
        is raised here."""
        instance, _ = self._started()
        sub = Subscription.of(topic, expression)
        if self._member is None:
            member = _PullMember(self.group)
            instance.register_consumer(self.group, member)
            self._member = member
        self._member.subscriptions[topic] = sub
        if on_reset is not None:
            self._member.on_reset = on_reset
        await instance.routes.update(topic)
        data = instance.heartbeat_data()
        addrs = instance.routes.broker_addrs(masters_only=False)
        results = await asyncio.gather(*(instance.api.heartbeat(a, data) for a in addrs), return_exceptions=True)
        for addr, result in zip(addrs, results):
            if isinstance(result, ResponseError):
                raise result
            if isinstance(result, BaseException):  # unreachable: the next periodic heartbeat tries again
                log.info("heartbeat of %s to %s failed: %s", self.group, addr, result)

    def consumed(self, msgs: list[StoredMessage]) -> None:
        """Trace ``msgs`` as consumed by ``group``, successfully (with ``trace``; else nothing)."""
        self._tracer.polled(msgs)

    def _started(self) -> tuple[ClientInstance, Puller]:
        if self._instance is None or self._puller is None:
            raise ClientStateError("the pull client is not started; call start() first")
        return self._instance, self._puller

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (fetched from the NameServer now); `NoRouteError` if none."""
        instance, _ = self._started()
        await instance.routes.update(topic)
        return list(await instance.routes.subscribe_queues(topic))

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, sub_expression: str = SUB_ALL,
                   expression_type: str = ExpressionType.TAG, timeout_ms: int = PULL_TIMEOUT_MS) -> PullResult:
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` matching the expression; answers at once.

        Tags are checked again on the client against the exact tag set.
        Continue from ``result.next_begin_offset`` whatever the status.
        """
        return await self._pull(mq, offset, max_nums, sub_expression, expression_type, False,
                                SUSPEND_TIMEOUT_MS, timeout_ms)

    async def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, sub_expression: str = SUB_ALL,
                       expression_type: str = ExpressionType.TAG,
                       timeout_ms: int = PULL_TIMEOUT_MS) -> RawPullResult:
        """`pull` without decoding: the answer's status, offsets and its run of stored records as
        the broker sent them, for a reader that decodes them as columns (no object per message).

        The records are not re-checked against the tag set: keep those whose TAGS is in
        ``result.recheck_tags`` when it is not None.
        """
        _, puller = self._started()
        self._check(offset, max_nums)
        return await puller.pull_raw(
            mq, offset, max_nums, group=self.group, sub_expression=sub_expression,
            expression_type=expression_type, sys_flag=pull_sys_flag(), suspend_timeout_ms=SUSPEND_TIMEOUT_MS,
            timeout_ms=timeout_ms,
        )

    async def pull_blocking(self, mq: MessageQueue, offset: int, max_nums: int = 32, *,
                            sub_expression: str = SUB_ALL, expression_type: str = ExpressionType.TAG,
                            suspend_timeout_ms: int = SUSPEND_TIMEOUT_MS) -> PullResult:
        """Like `pull`, but the broker holds the request up to ``suspend_timeout_ms`` until a message
        arrives (long polling); NO_NEW_MSG when none did."""
        return await self._pull(mq, offset, max_nums, sub_expression, expression_type, True,
                                suspend_timeout_ms, suspend_timeout_ms + LONG_POLL_EXTRA_MS)

    async def _pull(self, mq: MessageQueue, offset: int, max_nums: int, sub_expression: str,
                    expression_type: str, suspend: bool, suspend_timeout_ms: int, timeout_ms: int) -> PullResult:
        _, puller = self._started()
        self._check(offset, max_nums)
        return await puller.pull(
            mq, offset, max_nums, group=self.group, sub_expression=sub_expression,
            expression_type=expression_type, sys_flag=pull_sys_flag(suspend=suspend),
            suspend_timeout_ms=suspend_timeout_ms, timeout_ms=timeout_ms,
        )

    @staticmethod
    def _check(offset: int, max_nums: int) -> None:
        if offset < 0:
            raise MessageValidationError(f"the offset {offset} is negative")
        if not 0 < max_nums <= MAX_NUMS_LIMIT:
            raise MessageValidationError(f"max_nums must be between 1 and {MAX_NUMS_LIMIT}, not {max_nums}")


class _PullMember:
    """What the client instance asks of a joined pull client: its heartbeat entry and
    running info. No rebalance, no offsets (the caller owns them)."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.subscriptions: dict[str, Subscription] = {}
        self.on_reset: ResetListener | None = None

    def _subscription_data(self) -> tuple[Any, ...]:
        return tuple(s.to_data() for _, s in sorted(self.subscriptions.items()))

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(group_name=self.group, consume_type=ConsumeType.CONSUME_ACTIVELY,
                            message_model=MessageModel.CLUSTERING,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                            subscription_data_set=self._subscription_data())

    async def rebalance(self) -> None:
        return None

    async def persist_offsets(self) -> None:
        return None

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        if self.on_reset is not None and topic in self.subscriptions:
            self.on_reset(topic, offsets)

    def running_info(self) -> ConsumerRunningInfo:
        return ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.name,
                        "messageModel": MessageModel.CLUSTERING.name},
            subscription_set=self._subscription_data())


@mirror(AsyncPullClient, "fetch_subscribe_queues", "pull", "pull_raw", "pull_blocking", "join")
class PullClient(BlockingClient[AsyncPullClient]):
    """The blocking `AsyncPullClient`: same constructor, same methods."""

    def __init__(self, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncPullClient(namesrv_addr, **options))

    def consumed(self, msgs: list[StoredMessage]) -> None:
        """Trace ``msgs`` as consumed (with ``trace``); safe from any thread."""
        self._async.consumed(msgs)
