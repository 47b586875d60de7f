"""Message trace: what producers and consumers record about each message, and reading it back.

Skiff's producers and consumers trace by default (RocketMQ's clients do not,
and users keep missing it): every send and every consumption is written, in
RocketMQ's trace format, to ``RMQ_SYS_TRACE_TOPIC``. ``trace=False`` turns it
off; ``trace=TraceSettings(topic="MyTrace", ...)`` changes where and how.

    producer = AsyncProducer("orders", ns)                      # traced
    quiet = AsyncProducer("metrics", ns, trace=False)           # not traced
    async with AsyncAdmin(ns) as admin:
        for e in await query_trace(admin, result.msg_id):       # or a key, or the offset msg id
            print(e.kind, e.group, e.time_ms, e.cost_ms, e.status)

Records wait in a bounded buffer and go out in batches from the background
(a full buffer drops records and counts them: a send or a listener never
waits for tracing and never fails because of it); `shutdown` flushes what is
buffered. docs/trace.md has the format and the details.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skiff.client._impl.trace_format import (
    ConsumeReturnType,
    EndTransactionTrace,
    PubTrace,
    SubAfterTrace,
    SubBeforeTrace,
    TraceRecord,
    decode,
)
from skiff.client.errors import ClientConfigError, ClientError, NoRouteError
from skiff.common.errors import DecodeError
from skiff.common.limits import MESSAGE_MAX_BYTES, TRACE_BUFFER_MAX_RECORDS, TRACE_MESSAGE_MAX_BYTES
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import TRACE_TOPIC, topic_error
from skiff.common.stored_message import StoredMessage
from skiff.protocol.errors import ResponseError

if TYPE_CHECKING:
    from skiff.client.admin import AsyncAdmin

__all__ = ["TRACE_TOPIC", "TraceEvent", "TraceSettings", "TraceStats", "query_trace", "trace_settings"]

TRACE_QUERY_MAX_MESSAGES = 64
"""Trace messages read for one query (the broker's own cap on a key query)."""


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """Where and how a client traces. The defaults are RocketMQ's trace dispatcher's."""

    topic: str = TRACE_TOPIC
    buffer_max_records: int = TRACE_BUFFER_MAX_RECORDS
    """Records held before sending; more are dropped and counted in `TraceStats.dropped`."""
    flush_interval_ms: int = 500
    """How long a record waits for others to share its trace message."""
    message_max_bytes: int = TRACE_MESSAGE_MAX_BYTES
    send_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        problem = topic_error(self.topic)
        if problem:
            raise ClientConfigError(f"trace topic: {problem}")
        if self.buffer_max_records < 1 or self.flush_interval_ms < 1 or self.send_timeout_ms < 1:
            raise ClientConfigError("buffer_max_records, flush_interval_ms and send_timeout_ms must be positive")
        if not 1024 <= self.message_max_bytes <= MESSAGE_MAX_BYTES:
            raise ClientConfigError(f"message_max_bytes must be between 1024 and {MESSAGE_MAX_BYTES}")


def trace_settings(trace: bool | TraceSettings) -> TraceSettings | None:
    """A client constructor's ``trace`` argument as settings (None: tracing off)."""
    if isinstance(trace, TraceSettings):
        return trace
    if not isinstance(trace, bool):
        raise ClientConfigError(f"trace must be True, False or a TraceSettings, not {trace!r}")
    return TraceSettings() if trace else None


@dataclass(frozen=True, slots=True)
class TraceStats:
    """A client's trace counters since it started."""

    recorded: int
    """Records taken into the buffer."""
    dropped: int
    """Records refused because the buffer was full."""
    sent: int
    """Records in trace messages the broker stored."""
    failed: int
    """Records in trace messages whose send failed (logged)."""
    buffered: int
    """Records waiting now."""


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One step of a message's life: its send, one consumption, or its transaction's end.

    ``time_ms`` is when the send or the listener call began; ``status`` is
    ``success`` or ``failed`` (``pending`` for a consumption whose end is not
    traced yet; the state name for a transaction's end); ``client_host`` is the
    producer's or consumer's address.
    """

    kind: str
    """``send``, ``consume`` or ``end_transaction``."""
    msg_id: str
    time_ms: int
    group: str
    status: str
    cost_ms: int = 0
    client_host: str = ""
    topic: str = ""
    tags: str = ""
    keys: str = ""
    store_host: str = ""
    broker_name: str = ""
    queue_id: int = -1
    queue_offset: int = -1
    offset_msg_id: str = ""
    reconsume_times: int = 0
    consume_result: str = ""
    """How the listener ended (RocketMQ's ConsumeReturnType: SUCCESS, FAILED, EXCEPTION, ...)."""


def timeline(records: Iterable[tuple[TraceRecord, str]]) -> list[TraceEvent]:
    """Events from (record, trace message's born host) pairs, in time order: a SubBefore
    and its SubAfter (same request id and msg id) make one consumption."""
    pairs = list(records)
    ends = {(r.request_id, r.msg_id): r for r, _ in pairs if isinstance(r, SubAfterTrace)}
    events: list[TraceEvent] = []
    started: set[tuple[str, str]] = set()
    for record, born_host in pairs:
        if isinstance(record, PubTrace):
            events.append(_send_event(record, born_host))
        elif isinstance(record, SubBeforeTrace):
            started.add((record.request_id, record.msg_id))
            events.append(_consume_event(record, ends.get((record.request_id, record.msg_id)), born_host))
        elif isinstance(record, EndTransactionTrace):
            events.append(TraceEvent("end_transaction", record.msg_id, record.time_ms, record.group, record.state,
                                      client_host=born_host, topic=record.topic, tags=record.tags,
                                      keys=record.keys, store_host=record.store_host))
    for key, end in ends.items():
        if key not in started:  # its SubBefore went to another trace message that was lost
            events.append(TraceEvent("consume", end.msg_id, end.time_ms - end.cost_ms, end.group,
                                     _status(end.success), end.cost_ms, keys=end.keys,
                                     consume_result=_result(end.context_code)))
    return sorted(events, key=lambda e: (e.time_ms, e.kind != "send"))


def _send_event(r: PubTrace, born_host: str) -> TraceEvent:
    return TraceEvent("send", r.msg_id, r.time_ms, r.group, _status(r.success), r.cost_ms,
                      r.client_host or born_host, r.topic, r.tags, r.keys, r.store_host, r.broker_name, r.queue_id,
                      r.queue_offset, r.offset_msg_id)


def _consume_event(before: SubBeforeTrace, after: SubAfterTrace | None, born_host: str) -> TraceEvent:
    status = "pending" if after is None else _status(after.success)
    return TraceEvent("consume", before.msg_id, before.time_ms, before.group, status,
                      0 if after is None else after.cost_ms, before.client_host or born_host, before.topic,
                      keys=before.keys, reconsume_times=before.reconsume_times,
                      consume_result="" if after is None else _result(after.context_code))


def _status(success: bool) -> str:
    return "success" if success else "failed"


def _result(code: int) -> str:
    try:
        return ConsumeReturnType(code).name
    except ValueError:
        return str(code)


def events_for(key: str, messages: Iterable[StoredMessage]) -> list[TraceEvent]:
    """The events of the trace messages ``messages`` that concern ``key`` (a msg id or a key)."""
    records = [(r, m.born_host) for m in messages for r in decode(m.body.decode("utf-8", "replace"))]
    return timeline((r, host) for r, host in records if r.msg_id == key or key in r.keys.split())


async def query_trace(admin: AsyncAdmin, key: str, *, trace_topic: str = TRACE_TOPIC) -> list[TraceEvent]:
    """The traced life of the message ``key`` names: its msg id (UNIQ_KEY), one of its keys,
    or its offset msg id (looked up to find its msg id). Empty when nothing was traced."""
    key = key.strip()
    if not key:
        raise ClientError("give a msg id, an offset msg id or a key to trace")
    try:
        found = await admin.messages_by_key(trace_topic, key, max_num=TRACE_QUERY_MAX_MESSAGES)
    except NoRouteError:
        raise ClientError(f"the trace topic {trace_topic} does not exist: no client has traced to it yet "
                          f"(or they trace to another topic)") from None
    events = events_for(key, found)
    if events or not _looks_like_offset_msg_id(key):
        return events
    try:
        msg_id = (await admin.message_by_id(key)).msg_id
    except (ClientError, ResponseError):
        return []
    return await query_trace(admin, msg_id, trace_topic=trace_topic) if msg_id != key else []


def _looks_like_offset_msg_id(key: str) -> bool:
    try:
        decode_offset_msg_id(key.upper())
    except (DecodeError, ValueError):
        return False
    return True
