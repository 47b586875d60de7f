"""The low-level pull client: read a given queue from a given offset, nothing more.

No group membership, no rebalance, no offset commits: the caller owns the
offsets (a Spark executor reading an assigned range, a tool dumping a queue).
RocketMQ's DefaultMQPullConsumer minus its offset store.

    async with AsyncPullClient("127.0.0.1:9876") as client:
        for mq in await client.fetch_subscribe_queues("Orders"):
            result = await client.pull(mq, 0, 32, sub_expression="created || paid")
            ... result.messages, result.next_begin_offset ...
"""

from __future__ import annotations

from typing import Any

from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig, client_config_for
from skiff.client.credentials import Credentials
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.lifecycle import AsyncClient
from skiff.client._impl.pull_api import LONG_POLL_EXTRA_MS, SUSPEND_TIMEOUT_MS, Puller, pull_sys_flag
from skiff.client.blocking import BlockingClient, mirror
from skiff.client.errors import ClientStateError, MessageValidationError
from skiff.client.results import PullResult, RawPullResult
from skiff.common.message import MessageQueue
from skiff.common.names import group_error
from skiff.protocol.bodies.heartbeat import SUB_ALL, ExpressionType

PULL_CLIENT_GROUP = "SKIFF_PULL_CLIENT"
"""The consumer group pulls name when the caller gives none (brokers require one)."""
PULL_TIMEOUT_MS = 10_000
"""RocketMQ's consumerPullTimeoutMillis."""
MAX_NUMS_LIMIT = 1024


class AsyncPullClient(AsyncClient):
    """Pulls queues by offset; every call names the queue and the offset."""

    def __init__(self, namesrv_addr: str = "", *, group: str = PULL_CLIENT_GROUP,
                 instance_name: str = DEFAULT_INSTANCE_NAME, client_config: ClientConfig | None = None,
                 credentials: Credentials | None = None) -> None:
        problem = group_error(group)
        if problem:
            raise MessageValidationError(f"pull group: {problem}")
        self.group = group
        self.client_config = client_config_for(namesrv_addr, instance_name, client_config, credentials)
        self._instance: ClientInstance | None = None
        self._puller: Puller | None = None

    async def start(self) -> None:
        if self._instance is not None:
            raise ClientStateError("the pull client is already started")
        self._instance = ClientInstance.get(self.client_config)
        await self._instance.start()
        self._puller = Puller(self._instance.api, self._instance.routes)

    async def shutdown(self) -> None:
        instance, self._instance, self._puller = self._instance, None, None
        if instance is not None:
            await instance.shutdown()

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


@mirror(AsyncPullClient, "fetch_subscribe_queues", "pull", "pull_raw", "pull_blocking")
class PullClient(BlockingClient[AsyncPullClient]):
    """The blocking `AsyncPullClient`: same constructor, same methods."""

    def __init__(self, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncPullClient(namesrv_addr, **options))
