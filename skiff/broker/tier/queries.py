"""Queries that reach tiered data: by key, by message id and by time.

The store answers QUERY_MESSAGE, VIEW_MESSAGE_BY_ID, SEARCH_OFFSET_BY_TIMESTAMP and
GET_EARLIEST_MSG_STORETIME from what it keeps locally; for a tiered topic, what retention
deleted is in the tier. `wrap_queries` puts the handlers of the first two and the last behind
a look at the tier, and `QueryHooks.offset_at_time` is the look every search by time takes
(`OffsetsOperation.offset_at_time`), each only when the local answer may be missing something
the tier has:

- by key (KEYS or UNIQ_KEY, within a time range): fewer local hits than asked for. The
  manifest's first/last store times pick the files in the range (newest first, at most
  `TIER_QUERY_MAX_FILES`), each file's key index (`skiff.tier.index`) the offsets, the
  file's row groups the rows, checked on the row; hits the local answer already holds
  (same CommitLog offset) are left out, so a message uploaded and still local is answered once.
- by message id: the CommitLog offset of an offsetMsgId is not in the CommitLog any more.
  Every tiered topic's manifest (this broker group's) names the span of CommitLog offsets
  each file's records had; the row with that offset is the message, rebuilt byte for byte as
  a pull of it is. A CommitLog offset is never given to another record, so the id resolves to
  the message it was given to, wherever it now lives; a message of a topic that is not
  tiered, or whose file the tier expired, is not found (as before).
- by time: the local answer is the queue's local first offset (the time is at or before the
  first local message) and the tier reaches further back: the tier's first offset stored at
  or after the time (the manifest's times choose the file; it is read only when the time falls
  inside it). The earliest store time is the tier's first file's when the tier reaches back
  further than the disk.

A look at the tier may fetch from a bucket, so it runs on a worker thread and the answer comes
when it is done; a tier that cannot be read is a SYSTEM_ERROR naming it (never a silently
shorter answer).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from skiff.common.limits import TIER_QUERY_MAX_FILES
from skiff.common.record import read_head
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import QueueRequestHeader
from skiff.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from skiff.tier.backends import TierError
from skiff.tier.columns import rows_to_record_list
from skiff.tier.index import offsets_of, rows_with_key
from skiff.tier.tier import TimedOffset
from skiff.transport.connection import Connection, Handler, HandlerResult

if TYPE_CHECKING:
    from skiff.broker.tier.service import TierService

log = logging.getLogger(__name__)

Hook = Callable[[RemotingCommand, RemotingCommand], HandlerResult]
T = TypeVar("T")


class TierQueries:
    """The tier's part of each query (called on worker threads)."""

    def __init__(self, service: TierService) -> None:
        self.service = service
        self.tier = service.tier

    def by_key(self, topic: str, key: str, begin_ms: int, end_ms: int, limit: int, known: set[int],
               local_from: int | None) -> list[bytes]:
        """Stored records of ``topic`` in the tier with ``key``, stored within [begin_ms, end_ms],
        newest first, at most ``limit``, none whose CommitLog offset is in ``known``. Files whose
        records all lie at or above CommitLog offset ``local_from`` are skipped: the local index
        has answered for them (None: it has not, the broker keeps no index)."""
        m = self.service.manifest_of(topic)
        if m is None or limit <= 0:
            return []
        chosen = sorted((s for s in m.segments if s.first_store_ms <= end_ms and s.last_store_ms >= begin_ms
                         and not (local_from is not None and s.min_commit_log_offset >= local_from)),
                        key=lambda s: s.last_store_ms, reverse=True)[:TIER_QUERY_MAX_FILES]
        hits: list[tuple[int, bytes]] = []
        for seg in chosen:
            offsets = offsets_of(self.tier.key_index(seg), key)
            if not offsets:
                continue
            rows = rows_with_key(self.tier.rows_where(seg, "queue_offset", offsets), key)
            stored = rows.column("store_timestamp").cast(pa.int64()).to_pylist()
            physical = rows.column("commit_log_offset").to_pylist()
            for record, us, phys in zip(rows_to_record_list(rows), stored, physical):
                if begin_ms <= us // 1000 <= end_ms and phys not in known:
                    hits.append((us, record))
        hits.sort(key=lambda h: h[0], reverse=True)
        return [record for _, record in hits[:limit]]

    def by_commit_log_offset(self, offset: int) -> bytes | None:
        """The record stored at CommitLog ``offset``, from whichever tiered topic's file holds it."""
        for tc in self.service.uploader.tiered_topics():
            m = self.service.manifest_of(tc.topic_name)
            for seg in () if m is None else m.segments:
                if seg.holds_commit_log_offset(offset):
                    rows = self.tier.rows_where(seg, "commit_log_offset", [offset])
                    if rows.num_rows:
                        return rows_to_record_list(rows.slice(0, 1))[0]
        return None

    def offset_at_time(self, topic: str, queue_id: int, timestamp_ms: int, local_min: int) -> TimedOffset | None:
        """The queue's first tiered offset below ``local_min`` stored at or after ``timestamp_ms``,
        and its store time (None: the tier has none, the local answer stands)."""
        m = self.service.manifest_of(topic)
        for seg in () if m is None else m.queue(queue_id):
            if seg.first_offset >= local_min:
                break
            found = self.tier.offset_at_time(seg, timestamp_ms)
            if found is not None:
                return found if found.offset < local_min else None
        return None

    def earliest_store_time(self, topic: str, queue_id: int, local_min: int) -> int | None:
        """The store time of the queue's first tiered message when the tier reaches back further
        than the disk (the manifest's; no file is read)."""
        m = self.service.manifest_of(topic)
        segs = [] if m is None else m.queue(queue_id)
        return segs[0].first_store_ms if segs and segs[0].first_offset < local_min else None


class QueryHooks:
    """What each wrapped handler does after the local answer: decide (cheaply, on the event
    loop) whether the tier may add to it, and if so look on a worker thread."""

    def __init__(self, service: TierService) -> None:
        self.service = service
        self.store = service.store
        self.queries = TierQueries(service)

    def query_message(self, req: RemotingCommand, local: RemotingCommand) -> HandlerResult:
        q = QueryMessageRequestHeader.from_ext(req.ext_fields)
        limit = max(0, min(q.max_num, self.store.config.max_msgs_num_batch))
        records = _records(local) if local.code == ResponseCode.SUCCESS else []
        if not self.service.uploader.is_tiered(q.topic) or len(records) >= limit:
            return local
        known = {read_head(r).physical_offset for r in records}
        local_from = self.store.min_physical_offset if self.store.index is not None else None

        def look() -> RemotingCommand:
            found = records + self.queries.by_key(q.topic, q.key, q.begin_timestamp, q.end_timestamp,
                                                  limit - len(records), known, local_from)
            if not found:
                return local
            return req.response(ext_fields=local.ext_fields, body_parts=found)

        return self._on_thread(req, look)

    def view_message(self, req: RemotingCommand, local: RemotingCommand) -> HandlerResult:
        if local.code == ResponseCode.SUCCESS or not any(True for _ in self.service.uploader.tiered_topics()):
            return local
        offset = ViewMessageRequestHeader.from_ext(req.ext_fields).offset

        def look() -> RemotingCommand:
            record = self.queries.by_commit_log_offset(offset)
            return local if record is None else req.response(body=record)

        return self._on_thread(req, look)

    async def offset_at_time(self, topic: str, queue_id: int, timestamp_ms: int,
                             local: int) -> tuple[int, int] | None:
        """The look at the tier of every search by time (`OffsetsOperation.tier_at_time`:
        SEARCH_OFFSET_BY_TIMESTAMP, gRPC QueryOffset, Kafka ListOffsets, a reset of a group's
        offsets by time) after the disk answered ``local``: the tiered offset and its store time,
        or None (the disk's answer stands). A tier that cannot be read raises `TierError`."""
        local_min = self._time_in_tier(topic, queue_id, local)
        if local_min is None:
            return None
        return await self._thread(self.queries.offset_at_time, topic, queue_id, timestamp_ms, local_min)

    async def record_at(self, offset: int) -> bytes | None:
        """A consumer's send-back of a message whose CommitLog copy is gone
        (`MessagesOperation.tier_record`): the record stored at CommitLog ``offset``, from the
        tiered file that holds it, or None. A tier that cannot be read raises `TierError`."""
        if not any(True for _ in self.service.uploader.tiered_topics()):
            return None
        return await self._thread(self.queries.by_commit_log_offset, offset)

    async def _thread(self, look: Callable[..., T], *args: object) -> T:
        """``look(*args)`` on a worker thread; what goes wrong there is a `TierError` naming the tier."""
        try:
            return await asyncio.to_thread(look, *args)
        except TierError:
            raise
        except Exception as exc:  # a bucket that cannot be reached, a damaged file
            raise TierError(f"the tier {self.service.tier.backend.url} could not be read: {exc}") from exc

    def _time_in_tier(self, topic: str, queue_id: int, local: int) -> int | None:
        """The queue's local first offset when a search by time the disk answered ``local`` may
        find an earlier offset in the tier (the disk answered its first offset: the time is at or
        before its first message), else None."""
        if not self.service.uploader.is_tiered(topic):
            return None
        local_min = self.store.get_min_offset(topic, queue_id)
        return None if local > local_min or self._not_below(topic, queue_id, local_min) else local_min

    def earliest_store_time(self, req: RemotingCommand, local: RemotingCommand) -> HandlerResult:
        q = QueueRequestHeader.from_ext(req.ext_fields)
        if local.code != ResponseCode.SUCCESS or not self.service.uploader.is_tiered(q.topic):
            return local
        local_min = self.store.get_min_offset(q.topic, q.queue_id)
        if self._not_below(q.topic, q.queue_id, local_min):
            return local

        def look() -> RemotingCommand:
            found = self.queries.earliest_store_time(q.topic, q.queue_id, local_min)
            return local if found is None else req.response(ext_fields={"timestamp": str(found)})

        return self._on_thread(req, look)

    def _not_below(self, topic: str, queue_id: int, local_min: int) -> bool:
        """Whether the manifest kept (if any: none kept means look) says the tier holds nothing
        of the queue below what is local."""
        first = self.service.first_offset(topic, queue_id)
        kept = self.service.uploader.manifests.get(topic) or self.service.reads.manifest_kept(topic)
        return kept is not None and (first is None or first >= local_min)

    def _on_thread(self, req: RemotingCommand, look: Callable[[], RemotingCommand]) -> HandlerResult:
        async def answer() -> RemotingCommand:
            try:
                return await asyncio.to_thread(look)
            except Exception as exc:  # a bucket that cannot be reached, a damaged file
                log.error("tier: %s could not look in %s: %s", RequestCode(req.code).name,
                          self.service.tier.backend.url, exc)
                return req.response(ResponseCode.SYSTEM_ERROR,
                                    f"the tier {self.service.tier.backend.url} could not be read: {exc}")

        return answer()


def _records(answer: RemotingCommand) -> list[bytes]:
    """The stored records of a QUERY_MESSAGE answer, one by one."""
    body = b"".join(bytes(p) for p in answer.body_parts) if answer.body_parts is not None else bytes(answer.body or b"")
    out: list[bytes] = []
    pos = 0
    while pos < len(body):
        size = read_head(body, pos).total_size
        out.append(body[pos:pos + size])
        pos += size
    return out


def wrap_queries(handlers: dict[int, Handler], service: TierService) -> dict[int, Handler]:
    """``handlers`` with the three query codes answered from the tier too (a search by time
    looks in the tier through `OffsetsOperation.offset_at_time`, the hook `attach_reads` sets)."""
    hooks = QueryHooks(service)
    wrapped = dict(handlers)
    for code, hook in ((RequestCode.QUERY_MESSAGE, hooks.query_message),
                       (RequestCode.VIEW_MESSAGE_BY_ID, hooks.view_message),
                       (RequestCode.GET_EARLIEST_MSG_STORETIME, hooks.earliest_store_time)):
        if code in handlers:
            wrapped[code] = _after(handlers[code], hook)
    return wrapped


def _after(local: Handler, hook: Hook) -> Handler:
    def handle(conn: Connection, req: RemotingCommand) -> HandlerResult:
        answer = local(conn, req)
        return hook(req, answer) if isinstance(answer, RemotingCommand) else answer

    return handle
