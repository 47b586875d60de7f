"""PopState: what POP consumers have taken and not yet acknowledged, and where each
(group, topic, queue) reads next; persisted so that a restart loses none of it.

Per queue key (group, popped topic, queue id) it holds:

- the **cursor**: the next offset a pop reads. A pop moves it past what it
  delivers, so un-acknowledged messages are never read again from their queue;
- the **in-flight** messages of non-orderly pops, ``offset -> InFlight``
  (popTime, invisible ms, CommitLog offset). An ack deletes one; a change of
  invisible time re-stamps it; once it is due the reviver (`skiff.broker.pop.service`)
  copies it to the group's retry topic with reconsumeTimes + 1 (or to the DLQ) and
  deletes it. This replaces RocketMQ's CK/ACK records in ``rmq_sys_REVIVE_LOG``;
- the **orderly batch** of orderly pops: its un-acknowledged offsets, each with its
  delivery count, the attempt id that popped it and the offset after it. While
  one of its messages is un-acknowledged and invisible, the queue is blocked for the
  group; once it is due, the same messages are delivered again (count + 1). The
  cursor moves past the batch when all of it is acknowledged.

Durability: the whole state is written to ``config/popState.json`` (atomically,
fsynced) every ``popStatePersistInterval`` ms when it changed, and at shutdown.
Cursor and in-flight entries are written together, so after a crash the file is a
consistent earlier state: pops after it are delivered again (their cursor is
behind), acks after it are forgotten (the message comes back after its invisible
time). Nothing acknowledged-or-not is lost; some messages come twice
(at-least-once, as RocketMQ's POP).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skiff.broker.persist import Documents, JsonFile, WrittenWhenChanged
from skiff.protocol import fastjson

FILE_NAME = "popState.json"

QueueKey = tuple[str, str, int]
"""(consumer group, the topic popped: the topic itself or the group's retry topic for it, queue id)."""


@dataclass(slots=True)
class InFlight:
    pop_time: int
    invisible_ms: int
    commit_log_offset: int

    @property
    def visible_at(self) -> int:
        return self.pop_time + self.invisible_ms


@dataclass(slots=True)
class OrderBatch:
    """An orderly pop's messages that are not acknowledged yet."""

    attempt_id: str
    next_offset: int
    pending: dict[int, InFlight] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)

    def blocked(self, now_ms: int, attempt_id: str) -> bool:
        """True while the batch keeps the queue from its group: something is un-acknowledged
        and still invisible, and the pop is not a retry of the same attempt."""
        invisible = any(e.visible_at > now_ms for e in self.pending.values())
        return invisible and not (attempt_id and attempt_id == self.attempt_id)


class PopState(WrittenWhenChanged):
    def __init__(self, store_root: str) -> None:
        self._file = JsonFile.in_store(store_root, FILE_NAME)
        self.cursors: dict[QueueKey, int] = {}
        self.in_flight: dict[QueueKey, dict[int, InFlight]] = {}
        self.batches: dict[QueueKey, OrderBatch] = {}

    # -- in-flight messages -----------------------------------------------------

    def add(self, key: QueueKey, offset: int, entry: InFlight) -> None:
        self.in_flight.setdefault(key, {})[offset] = entry
        self.changed()

    def forget_topic(self, topic: str) -> None:
        """Drop every cursor, in-flight message and orderly batch of ``topic`` (a deleted topic
        made again starts at offset 0, with nothing popped)."""
        dropped = False
        for table in (self.cursors, self.in_flight, self.batches):
            for key in [k for k in table if k[1] == topic]:
                del table[key]
                dropped = True
        if dropped:
            self.changed()

    def find(self, key: QueueKey, offset: int, pop_time: int, orderly: bool) -> InFlight | None:
        """The in-flight entry a handle names; None once it was acked, revived or re-popped."""
        if orderly:
            batch = self.batches.get(key)
            entry = None if batch is None else batch.pending.get(offset)
        else:
            entry = self.in_flight.get(key, {}).get(offset)
        return entry if entry is not None and entry.pop_time == pop_time else None

    def remove(self, key: QueueKey, offset: int) -> None:
        entries = self.in_flight.get(key)
        if entries is not None and entries.pop(offset, None) is not None:
            self.changed()
            if not entries:
                del self.in_flight[key]

    def ack_orderly(self, key: QueueKey, offset: int) -> bool:
        """Acknowledge one message of an orderly batch; True when that completes the batch
        (the cursor then moves past it and the queue is free again)."""
        batch = self.batches.get(key)
        if batch is None or batch.pending.pop(offset, None) is None:
            return False
        self.changed()
        if batch.pending:
            return False
        self.cursors[key] = batch.next_offset
        del self.batches[key]
        return True

    def uncount(self, key: QueueKey, offset: int) -> bool:
        """Take back the delivery an orderly message's next serving would count (gRPC
        ChangeInvisibleDuration's ``suspend``: the message waits, it is not retried, so it gets no
        nearer the DLQ and comes back with the same delivery attempt); False when the message is
        not in an orderly batch."""
        batch = self.batches.get(key)
        if batch is None or offset not in batch.pending:
            return False
        batch.counts[offset] = batch.counts.get(offset, 1) - 1
        self.changed()
        return True

    def due(self, now_ms: int) -> list[tuple[QueueKey, int, InFlight]]:
        """Non-orderly in-flight messages whose invisible time has passed."""
        return [(key, offset, entry) for key, entries in self.in_flight.items()
                for offset, entry in entries.items() if entry.visible_at <= now_ms]

    def lowest_unacked(self, key: QueueKey) -> int | None:
        """The offset a group has consumed up to in a queue (its committed offset): the
        lowest one still in flight, else the cursor. Entries are added in offset order (the
        cursor only moves forward), so the lowest is each table's first key."""
        entries = self.in_flight.get(key)
        batch = self.batches.get(key)
        pending = batch.pending if batch is not None else None
        if not pending:  # the common case (run at every ack): no orderly batch, no list built
            return next(iter(entries)) if entries else self.cursors.get(key)
        return min(next(iter(entries)), next(iter(pending))) if entries else next(iter(pending))

    # -- persistence ---------------------------------------------------------------

    def documents(self) -> Documents:
        doc = {
            "cursors": [[*key, offset] for key, offset in self.cursors.items()],
            "inFlight": [[*key, offset, e.pop_time, e.invisible_ms, e.commit_log_offset]
                         for key, entries in self.in_flight.items() for offset, e in entries.items()],
            "orderly": [[*key, b.attempt_id, b.next_offset,
                         [[o, e.pop_time, e.invisible_ms, e.commit_log_offset, b.counts.get(o, 1)]
                          for o, e in b.pending.items()]] for key, b in self.batches.items()],
        }
        return ((self._file, fastjson.dumps(doc)),)

    def load(self) -> None:
        doc = self._file.load()
        if doc is None:
            return
        for group, topic, queue_id, offset in doc.get("cursors", ()):
            self.cursors[(group, topic, queue_id)] = offset
        for group, topic, queue_id, offset, pop_time, invisible_ms, clo in doc.get("inFlight", ()):
            self.in_flight.setdefault((group, topic, queue_id), {})[offset] = InFlight(pop_time, invisible_ms, clo)
        for group, topic, queue_id, attempt_id, next_offset, pending in doc.get("orderly", ()):
            batch = OrderBatch(attempt_id, next_offset)
            for offset, pop_time, invisible_ms, clo, count in pending:
                batch.pending[offset] = InFlight(pop_time, invisible_ms, clo)
                batch.counts[offset] = count
            self.batches[(group, topic, queue_id)] = batch
