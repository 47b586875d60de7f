"""Pulling one queue: the request, the broker to ask, and the answer as a `PullResult`
(RocketMQ's PullAPIWrapper). Shared by `AsyncPullClient` and the consumers.

The broker may suggest reading from a slave (``suggestWhichBrokerId``); the
next pull of that queue goes there. Messages of a tag subscription are checked
again against the exact tag set, since the broker filters on tag hash codes,
which can collide. A FOUND answer's messages carry the queue's bounds as the
MIN_OFFSET and MAX_OFFSET properties, as Java's client sets them.
"""

from __future__ import annotations

import functools
from typing import Any

from skiff.client._impl.api import MQClientAPI, PullResponse
from skiff.client._impl.route import MASTER_ID, RouteCache
from skiff.client.results import PullResult, PullStatus, RawPullResult
from skiff.common.message import MessageQueue
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.common.sysflag import PullSysFlag
from skiff.common.limits import LONG_POLL_DEFAULT_MS
from skiff.filter import build_filter
from skiff.filter.factory import expression_type_of
from skiff.filter.tags import TagFilter
from skiff.protocol.bodies.heartbeat import SUB_ALL, ExpressionType
from skiff.protocol.codes import ResponseCode
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.protocol.message_codec import decode_stored_messages

PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}

SUSPEND_TIMEOUT_MS = LONG_POLL_DEFAULT_MS
"""How long a broker holds a pull with nothing to return (RocketMQ's pull consumer default)."""
LONG_POLL_EXTRA_MS = 10_000
"""A long-polling pull's client-side timeout is the suspend time plus this much."""


def pull_sys_flag(*, commit_offset: bool = False, suspend: bool = False, subscription: bool = True) -> int:
    flag = 0
    if commit_offset:
        flag |= PullSysFlag.COMMIT_OFFSET
    if suspend:
        flag |= PullSysFlag.SUSPEND
    if subscription:
        flag |= PullSysFlag.SUBSCRIPTION
    return int(flag)


@functools.lru_cache(maxsize=256)
def exact_tags(sub_expression: str, expression_type: str) -> frozenset[str] | None:
    """The tag set the client re-checks, or None when nothing is re-checked (``*``, SQL92).
    Cached: every pull asks.

    Raises `skiff.filter.FilterError` for an expression that does not parse.
    """
    compiled = build_filter(sub_expression or SUB_ALL, expression_type or ExpressionType.TAG)
    return compiled.tags if isinstance(compiled, TagFilter) else None


@functools.lru_cache(maxsize=16)
def _wire_type(expression_type: str) -> str:
    """The expressionType a pull sends for what the caller named (TAG, SQL92)."""
    return expression_type_of(expression_type).value


def to_pull_result(raw: RawPullResult) -> PullResult:
    """A raw answer as a `PullResult`: its records decoded, re-checked against the tag set,
    each carrying the queue's bounds (MIN_OFFSET, MAX_OFFSET)."""
    messages: list[StoredMessage] = []
    if raw.body:
        bounds = {Prop.MIN_OFFSET: str(raw.min_offset), Prop.MAX_OFFSET: str(raw.max_offset)}
        messages = decode_stored_messages(raw.body, extra_properties=bounds)
        tags = raw.recheck_tags
        if tags is not None:
            messages = [m for m in messages if m.get_property(Prop.TAGS) in tags]
    return PullResult(raw.status, raw.next_begin_offset, raw.min_offset, raw.max_offset, messages,
                      raw.suggest_which_broker_id)


def to_raw_result(resp: PullResponse, tags: frozenset[str] | None) -> RawPullResult:
    """The answer of a pull with its records undecoded (``body`` only for FOUND)."""
    header = resp.header
    status = PULL_STATUS[resp.code]
    # A decoded frame's body is bytes already, which bytes() hands back as is (no copy).
    body = bytes(resp.body) if status is PullStatus.FOUND and resp.body else b""
    return RawPullResult(status, header.next_begin_offset, header.min_offset, header.max_offset,
                         body, tags, header.suggest_which_broker_id)


class Puller:
    """Sends pulls to the right broker of each queue and turns the answers into results."""

    def __init__(self, api: MQClientAPI, routes: RouteCache) -> None:
        self._api = api
        self._routes = routes
        self._suggested: dict[MessageQueue, int] = {}

    async def broker_addr(self, mq: MessageQueue) -> str:
        """Where to pull ``mq`` from: the broker last suggested for it, else the master."""
        if self._routes.broker_data(mq.broker_name) is None:
            await self._routes.route(mq.topic)
        return self._known_addr(mq)

    def _known_addr(self, mq: MessageQueue) -> str:
        return self._routes.find_broker_addr(mq.broker_name, self._suggested.get(mq, MASTER_ID))

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int, **options: Any) -> PullResult:
        """One PULL_MESSAGE for ``mq`` from ``offset``, decoded; `pull_raw`'s options."""
        return to_pull_result(await self.pull_raw(mq, offset, max_nums, **options))

    async def pull_raw(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int,
        *,
        group: str,
        sub_expression: str = SUB_ALL,
        expression_type: str = ExpressionType.TAG,
        sub_version: int = 0,
        sys_flag: int | None = None,
        commit_offset: int = 0,
        suspend_timeout_ms: int = SUSPEND_TIMEOUT_MS,
        timeout_ms: int | None = None,
    ) -> RawPullResult:
        """One PULL_MESSAGE for ``mq`` from ``offset``, records left raw; raises the broker's
        error for other codes."""
        kind = _wire_type(expression_type)
        tags = exact_tags(sub_expression, kind)
        header = PullMessageRequestHeader(
            group, mq.topic, mq.queue_id, offset, max_nums,
            pull_sys_flag() if sys_flag is None else sys_flag,
            commit_offset, suspend_timeout_ms, sub_version, sub_expression or SUB_ALL,
            kind, mq.broker_name,
        )
        known = self._routes.broker_data(mq.broker_name) is not None  # no coroutine on every pull
        resp = await self._api.pull(self._known_addr(mq) if known else await self.broker_addr(mq), header, timeout_ms)
        result = to_raw_result(resp, tags)
        self._suggested[mq] = result.suggest_which_broker_id
        return result
