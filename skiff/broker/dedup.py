"""Deduplication by the client's message id: a topic's duplicate window over UNIQ_KEY.

A topic with the attribute ``dedup.window.ms`` = *w* > 0 stores a message whose UNIQ_KEY
was stored in the topic within the last *w* milliseconds once: the second send is not
appended and is answered SEND_OK with the original's offsetMsgId, queue and queue offset,
as NATS JetStream answers a duplicate Msg-Id with the original's sequence and Kafka a
retried idempotent batch with its original base offset. So a producer's retry after a
lost answer, a `skiff replay` run twice or a Spark sink task retried (both send the same
ids again) store each message once. Messages without a UNIQ_KEY are always stored.

Batches, answered as RocketMQ answers a batch (one answer for the whole batch): only its
messages not stored already (nor earlier in the same batch) are appended; the answer's
offsetMsgIds list every message of the batch in its order (a duplicate's is its
original's), its queue and queue offset are those of the first message this batch stored;
a batch wholly stored already is answered with its first message's original queue and
offset.

Single sends that one read brings stay coalesced (skiff/broker/operations/send_requests.py):
per queue run, `duplicates` names those whose key the window holds or an earlier send of the
run carries; the others are appended in one write and recorded, then each of those is
answered alone (`duplicate`), or appended alone if its original's append failed: the answers
the sends would get one by one. Runs go in the order their queues first appear in the read,
so a key sent twice in one read to two queues is stored in the queue whose run goes first.

The window of a topic is a map UNIQ_KEY -> where it was stored, oldest first, bounded by
time (entries older than *w* by their store time go) and by `DEDUP_WINDOW_MAX_KEYS` (past
it the oldest go first, so a window that would hold more is shorter than *w*). It is built
from the store on the topic's first send (after a restart, a crash, a promotion to a new
master term, or a change of the topic's config: the attribute set or its span changed, the
topic deleted and made again): the ConsumeQueue's time search finds each queue's first message
within *w*, and the messages from there to the queue's end are read back. The CommitLog is
the only truth: everything stored survives a restart (a SIGKILL included) in the store's
recovery, so a window read back from it lets no duplicate in; what a crash lost was never
acknowledged, and is stored when sent again. The IndexFile indexes UNIQ_KEY too, but a
lookup through it is a hash-chain walk plus a CommitLog read per send, and it cannot say
"not there" without walking the whole chain; the in-memory window answers both with one
dict lookup.

A message is recorded as soon as the store has appended it, before any wait for the flush
or a slave (as Kafka records a batch): a retry of a send whose answer timed out is a
duplicate. A duplicate's answer waits for a slave as far as the original's end (SYNC_MASTER),
not for a flush of its own.

One mechanism with Kafka's: both checks sit in the broker's send path, answer a duplicate
with the original's offset without storing it, and read their state back from the CommitLog
after a restart. They stay two checks because they key on what each protocol's producer
carries: a Kafka idempotent producer numbers its batches per partition (producer id, epoch,
sequence: `skiff.broker.kafka.idempotence`, which also refuses gaps), a RocketMQ producer
gives each message an id (UNIQ_KEY) and may retry it on another queue or broker, so its
window is per topic, not per queue. A Kafka record whose headers carry UNIQ_KEY on a topic
with a window is checked by both.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from skiff.broker.topics import TopicConfigManager
from skiff.common.errors import DecodeError
from skiff.common.limits import DEDUP_WINDOW_MAX_KEYS, PULL_MAX_BYTES
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.properties import Prop
from skiff.common.stored_message import decode_record
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS, dedup_window_ms
from skiff.store import MessageInput, MessageStore, PutResult, PutStatus

_READ_BATCH = 256
"""Messages read per store call when a window is read back."""


class Original(NamedTuple):
    """Where a message was first stored (one per key in a window)."""

    queue_id: int
    queue_offset: int
    offset_msg_id: str
    store_ms: int


class DedupWindow:
    """One topic's window: UNIQ_KEY -> `Original`, oldest stored first."""

    def __init__(self, window_ms: int, max_keys: int = DEDUP_WINDOW_MAX_KEYS) -> None:
        if window_ms <= 0 or max_keys <= 0:
            raise ValueError(f"a duplicate window needs a positive span and size, not {window_ms} ms / {max_keys}")
        self.window_ms = window_ms
        self.max_keys = max_keys
        self._keys: OrderedDict[str, Original] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def find(self, key: str, now_ms: int) -> Original | None:
        """The original of ``key`` if it was stored within the window before ``now_ms``."""
        self.expire(now_ms)
        return self._keys.get(key)

    def record(self, key: str, original: Original) -> None:
        """``key`` stored at ``original``; a key held already keeps its first original."""
        if key in self._keys:
            return
        self._keys[key] = original
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)

    def expire(self, now_ms: int) -> None:
        oldest = now_ms - self.window_ms
        keys = self._keys
        while keys:
            first = next(iter(keys.values()))
            if first.store_ms >= oldest:
                return
            keys.popitem(last=False)


Put = Callable[[list[MessageInput], int], PutResult]
"""The store's append of rows of one queue (`SendOperation.put`)."""


class Deduplication:
    """The windows of every topic with ``dedup.window.ms`` set, built on first use."""

    def __init__(self, store: MessageStore, topics: TopicConfigManager, now_ms: Callable[[], int],
                 master_epoch: Callable[[], int] = lambda: 0) -> None:
        """``master_epoch``: the master term this broker serves; a new one (a promotion in
        controller mode, after another master stored messages) reads every window back."""
        self.store = store
        self.topics = topics
        self.now_ms = now_ms
        self.master_epoch = master_epoch
        self._epoch = master_epoch()
        self._windows: dict[str, tuple[TopicConfig, DedupWindow]] = {}
        """Each window with the topic config it was read back under: a topic changed (deleted
        and made again, its queues changed) reads its window back."""

    def window(self, topic: str) -> DedupWindow | None:
        """``topic``'s window, read back from the store when it has none yet (or the topic's
        config changed); None when the topic has no ``dedup.window.ms``."""
        return self.window_of(topic, self.topics.get(topic))

    def window_of(self, topic: str, tc: TopicConfig | None) -> DedupWindow | None:
        """`window`, for a caller that holds the topic's config already (the gate's answer)."""
        held = self._windows.get(topic) if self._windows else None
        if held is not None and held[0] is tc and self._epoch == self.master_epoch():
            return held[1]  # a config is never changed in place: it still has the window
        if tc is None or DEDUP_WINDOW_MS not in tc.attributes:  # most topics: one dict test
            if self._windows:
                self._windows.pop(topic, None)
            return None
        window_ms = dedup_window_ms(tc.attributes)
        if window_ms <= 0:
            if self._windows:
                self._windows.pop(topic, None)
            return None
        if self._epoch != self.master_epoch():
            self._epoch = self.master_epoch()
            self._windows.clear()
        held = self._windows.get(topic)
        if held is not None and held[0] is tc:
            return held[1]
        assert tc is not None
        window = self.read_back(topic, window_ms)
        self._windows[topic] = (tc, window)
        return window

    def covers(self, topic: str) -> bool:
        """Whether ``topic`` has a duplicate window (the gRPC door then sends a multi-message request
        message by message: `SendOperation.send_messages`)."""
        tc = self.topics.get(topic)
        return tc is not None and dedup_window_ms(tc.attributes) > 0

    def read_back(self, topic: str, window_ms: int) -> DedupWindow:
        """A window of ``topic`` holding the messages its queues stored within ``window_ms``:
        of each queue at most its even share of `DEDUP_WINDOW_MAX_KEYS`, the newest (so a
        read back costs at most that many records in all: it runs on the loop, at the
        topic's first send)."""
        window = DedupWindow(window_ms)
        since = self.now_ms() - window_ms
        found: list[tuple[str, Original]] = []
        store = self.store
        queue_ids = store.queue_ids(topic)
        share = window.max_keys // max(1, len(queue_ids))
        for queue_id in queue_ids:
            end = store.get_max_offset(topic, queue_id)
            offset = max(store.get_offset_by_time(topic, queue_id, since), end - share,
                         store.get_min_offset(topic, queue_id))
            while offset < end:
                got = store.get_messages(topic, queue_id, offset, _READ_BATCH, max_bytes=PULL_MAX_BYTES)
                if not got.found:
                    break
                found.extend(_originals(got.buffers, since))
                offset = max(got.next_begin_offset, offset + 1)
        found.sort(key=lambda f: f[1].store_ms)
        for key, original in found[-window.max_keys:]:
            window.record(key, original)
        return window

    def append(self, window: DedupWindow, queue_id: int, rows: list[MessageInput], body_bytes: int,
               put: Put) -> tuple[PutResult, int]:
        """Append the rows of ``rows`` not stored within ``window`` and record them; the
        result the send is answered with (see the module docstring) and its queue."""
        now = self.now_ms()
        sources: list[Original | int] = []
        # per row: its original, or its place among the rows appended now
        fresh: list[MessageInput] = []
        placed: dict[str, int] = {}
        for row in rows:
            key = row.uniq_key
            source: Original | int | None = None if key is None else window.find(key, now) or placed.get(key)
            if source is None:
                source = len(fresh)
                if key is not None:
                    placed[key] = source
                fresh.append(row)
            sources.append(source)
        if len(fresh) == len(rows):
            result = put(rows, body_bytes)
            self.record(window, queue_id, rows, result)
            return result, queue_id
        if not fresh:
            return _duplicate([s for s in sources if isinstance(s, Original)])
        result = put(fresh, sum(len(r.body) for r in fresh))
        if not result.ok:
            return result, queue_id
        self.record(window, queue_id, fresh, result)
        new_ids = result.offset_msg_ids
        ids = tuple(s.offset_msg_id if isinstance(s, Original) else new_ids[s] for s in sources)
        return PutResult(status=result.status, reason=result.reason, physical_offset=result.physical_offset,
                         offset_msg_ids=ids, queue_offset=result.queue_offset, message_count=result.message_count,
                         store_timestamp=result.store_timestamp, wrote_bytes=result.wrote_bytes,
                         flushed=result.flushed), queue_id

    def duplicates(self, window: DedupWindow, rows: list[MessageInput]) -> list[int] | None:
        """The positions in ``rows`` (single sends of one queue, each answered on its own) of
        those whose UNIQ_KEY ``window`` holds or an earlier row carries; None when there are none.
        The caller appends the others and records them (`record`), then answers each of these alone:
        `duplicate` finds its original then (or, if that append failed, it is appended itself),
        as if the sends had come one by one."""
        now = self.now_ms()
        found: list[int] | None = None
        seen: set[str] | None = None if len(rows) == 1 else set()
        for k, row in enumerate(rows):
            key = row.uniq_key
            if key is None:
                continue
            if window.find(key, now) is not None or (seen is not None and key in seen):
                found = [k] if found is None else found + [k]
            elif seen is not None:
                seen.add(key)
        return found

    def duplicate(self, window: DedupWindow, row: MessageInput) -> tuple[PutResult, int] | None:
        """The answer to a single send of ``row`` if ``window`` holds its UNIQ_KEY (its original's,
        as `append` answers it) and the original's queue; None when it is to be stored."""
        original = None if row.uniq_key is None else window.find(row.uniq_key, self.now_ms())
        return None if original is None else _duplicate([original])

    def record(self, window: DedupWindow, queue_id: int, rows: list[MessageInput], result: PutResult) -> None:
        """``rows``, appended to ``queue_id`` with ``result``, into ``window`` (nothing if it failed)."""
        if not result.ok:
            return
        for k, (row, msg_id) in enumerate(zip(rows, result.offset_msg_ids)):
            if row.uniq_key is not None:
                window.record(row.uniq_key, Original(queue_id, result.queue_offset + k, msg_id,
                                                     result.store_timestamp))


def _duplicate(originals: list[Original]) -> tuple[PutResult, int]:
    """The answer to a send whose every message was stored already, and its queue: the
    first's queue and offset and every message's offsetMsgId; its end is the original's,
    so a SYNC_MASTER answer waits until a slave has it."""
    first = originals[0]
    physical = decode_offset_msg_id(first.offset_msg_id).physical_offset
    ids = tuple(o.offset_msg_id for o in originals)
    return PutResult(status=PutStatus.PUT_OK, physical_offset=physical, offset_msg_ids=ids,
                     queue_offset=first.queue_offset, message_count=0, store_timestamp=first.store_ms,
                     wrote_bytes=0), first.queue_id


def _originals(buffers: list[memoryview], since_ms: int) -> list[tuple[str, Original]]:
    out = []
    for buf in buffers:
        pos = 0
        while pos + 4 <= len(buf):
            size = int.from_bytes(buf[pos:pos + 4], "big")
            if size <= 0:
                break
            try:
                msg = decode_record(buf[pos:pos + size], decompress=False)
            except DecodeError:
                msg = None
            pos += size
            key = None if msg is None else msg.properties.get(Prop.UNIQ_KEY)
            if msg is not None and key is not None and msg.store_timestamp >= since_ms:
                out.append((key, Original(msg.queue_id, msg.queue_offset, msg.offset_msg_id, msg.store_timestamp)))
    return out
