"""Messages in the dashboard: queries (id, key, time range), detail with trace, resend to a
group, dead letters, and consuming a few messages for a group.

A resend goes to the group's retry topic (``%RETRY%<group>``) with the original
topic in RETRY_TOPIC, as the broker's own send-back does: only that group's
consumers get it again, and they see it under its original topic and msg id.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from skiff.client.admin import QUERY_MAX_NUM, TIME_MAX_MS, AsyncAdmin
from skiff.client.errors import ClientError, MessageValidationError, NoRouteError
from skiff.client.producer import AsyncProducer
from skiff.client.pull_client import AsyncPullClient
from skiff.client.results import PullStatus
from skiff.client.trace import query_trace
from skiff.common.message import Message, MessageQueue
from skiff.common.names import dlq_topic, group_error, retry_topic
from skiff.common.properties import SYSTEM_PROPERTIES, Prop
from skiff.common.stored_message import StoredMessage
from skiff.dashboard.form import Form
from skiff.dashboard.preview import preview_body

PULL_BATCH = 32
MESSAGES_PER_REQUEST_MAX = 1000
"""Most messages one dashboard request reads, consumes or sends: a page stays a page."""
KEPT_ON_RESEND = frozenset({Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY})
"""System properties a resent copy keeps (the rest belong to where and how it was stored)."""


def message_row(m: StoredMessage, *, body: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {
        "msg_id": m.msg_id, "offset_msg_id": m.offset_msg_id, "topic": m.topic, "tags": m.tags or "",
        "keys": list(m.keys), "queue_id": m.queue_id, "queue_offset": m.queue_offset,
        "born_timestamp": m.born_timestamp, "born_host": m.born_host, "store_timestamp": m.store_timestamp,
        "store_host": m.store_host, "reconsume_times": m.reconsume_times, "properties": dict(m.properties),
        "body_bytes": len(m.body),
    }
    if body:
        p = preview_body(m.body)
        row["body"] = {"encoding": p.encoding, "text": p.text, "truncated": p.truncated}
    return row


class MessageService:
    def __init__(self, admin: AsyncAdmin, producer: AsyncProducer, puller: AsyncPullClient) -> None:
        self.admin = admin
        self.producer = producer
        self.puller = puller

    async def query(self, form: Form) -> dict[str, Any]:
        """By ``msg_id`` (offsetMsgId, or UNIQ_KEY with ``topic``), by ``key`` of ``topic``, or
        every message of ``topic`` stored between ``begin`` and ``end``."""
        max_num = form.integer("max", QUERY_MAX_NUM, low=1, high=MESSAGES_PER_REQUEST_MAX)
        if form.text("msg_id", ""):
            found = [await self.admin.message_by_id(form.text("msg_id"), form.text("topic", "") or None)]
        else:
            topic = form.text("topic")
            begin, end = form.time_ms("begin", 0), form.time_ms("end", TIME_MAX_MS)
            if begin > end:
                raise MessageValidationError("begin is after end")
            key = form.text("key", "")
            found = (await self.admin.messages_by_key(topic, key, begin_ms=begin, end_ms=end, max_num=max_num)
                     if key else await self.by_time(topic, begin, end, max_num))
        return {"messages": [message_row(m, body=False) for m in found]}

    async def by_time(self, topic: str, begin_ms: int, end_ms: int, max_num: int) -> list[StoredMessage]:
        """The first ``max_num`` messages of ``topic`` stored in [begin, end), oldest first."""
        queues = await self.puller.fetch_subscribe_queues(topic)

        async def one(mq: MessageQueue) -> list[StoredMessage]:
            start = await self.admin.search_offset(mq, begin_ms)
            stop = await self.admin.max_offset(mq) if end_ms >= TIME_MAX_MS else await self.admin.search_offset(
                mq, end_ms)
            return [m for m in await self.read(mq, start, stop, max_num) if begin_ms <= m.store_timestamp < end_ms]

        found = [m for batch in await asyncio.gather(*(one(q) for q in queues)) for m in batch]
        return sorted(found, key=lambda m: (m.store_timestamp, m.store_host, m.commit_log_offset))[:max_num]

    async def read(self, mq: MessageQueue, start: int, stop: int, limit: int) -> list[StoredMessage]:
        """Messages of ``mq`` at offsets [start, stop), at most ``limit``."""
        out: list[StoredMessage] = []
        offset = start
        while offset < stop and len(out) < limit:
            result = await self.puller.pull(mq, offset, min(PULL_BATCH, stop - offset))
            out.extend(m for m in result.messages if m.queue_offset < stop)
            if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                break
            offset = result.next_begin_offset
        return out[:limit]

    async def detail(self, msg_id: str, topic: str | None) -> dict[str, Any]:
        msg = await self.admin.message_by_id(msg_id, topic)
        try:
            trace = [dataclasses.asdict(e) for e in await query_trace(self.admin, msg.msg_id)]
            trace_error = None
        except ClientError as exc:
            trace, trace_error = [], str(exc)
        return {"message": message_row(msg), "trace": trace, "trace_error": trace_error}

    async def resend(self, form: Form) -> dict[str, Any]:
        """Send a copy of the message ``msg_id`` (of ``topic``) to ``group``'s retry topic."""
        group = form.text("group")
        problem = group_error(group)
        if problem:
            raise MessageValidationError(f"group: {problem}")
        msg = await self.admin.message_by_id(form.text("msg_id"), form.text("topic", "") or None)
        original = msg.properties.get(Prop.RETRY_TOPIC) or msg.topic
        props = {k: v for k, v in msg.properties.items() if k not in SYSTEM_PROPERTIES or k in KEPT_ON_RESEND}
        props[Prop.RETRY_TOPIC] = original
        props[Prop.ORIGIN_MESSAGE_ID] = msg.offset_msg_id
        result = await self.producer.send(Message(retry_topic(group), msg.body, props, msg.flag))
        return {"group": group, "msg_id": result.msg_id, "offset_msg_id": result.offset_msg_id,
                "topic": retry_topic(group), "original_topic": original, "status": result.send_status.name}

    async def dlq(self, group: str, max_num: int = QUERY_MAX_NUM) -> dict[str, Any]:
        """The newest ``max_num`` dead letters of ``group`` (none when it has no DLQ topic yet)."""
        try:
            queues = await self.puller.fetch_subscribe_queues(dlq_topic(group))
        except NoRouteError:
            return {"group": group, "topic": dlq_topic(group), "messages": []}

        async def newest(mq: MessageQueue) -> list[StoredMessage]:
            low, high = await self.admin.min_offset(mq), await self.admin.max_offset(mq)
            return await self.read(mq, max(low, high - max_num), high, max_num)

        found = [m for batch in await asyncio.gather(*(newest(q) for q in queues)) for m in batch]
        found.sort(key=lambda m: m.store_timestamp, reverse=True)
        return {"group": group, "topic": dlq_topic(group), "messages": [message_row(m) for m in found[:max_num]]}

    async def consume(self, group: str, topic: str, max_messages: int) -> list[StoredMessage]:
        """Read up to ``max_messages`` from ``group``'s committed offsets of ``topic`` (the first
        message where it has none) and commit past them: a manual consumer."""
        problem = group_error(group)
        if problem:
            raise MessageValidationError(f"group: {problem}")
        queues = await self.puller.fetch_subscribe_queues(topic)
        got: list[StoredMessage] = []
        for mq in queues:
            committed = await self.admin.fetch_consumer_offset(group, mq)
            start = committed if committed is not None and committed >= 0 else await self.admin.min_offset(mq)
            batch = await self.read(mq, start, await self.admin.max_offset(mq), max_messages - len(got))
            got.extend(batch)
            await self.admin.update_consumer_offset(group, mq, batch[-1].queue_offset + 1 if batch else start)
        return got
