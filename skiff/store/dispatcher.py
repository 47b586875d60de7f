"""The dispatcher: the one code path that turns CommitLog records into ConsumeQueue and
index entries.

Its input is a sequence of `DispatchRequest`s. The append path builds them from
what it has just written (the broker parsed tags and keys already); recovery and
replication build them by parsing records (`request_from_record`). Either way the
same `Dispatcher.dispatch` writes the entries.

Only records of transaction type NOT or COMMIT go into a ConsumeQueue: a
prepared or rolled-back message is stored, and found by its offset, but never
consumed. The index takes every type but ROLLBACK (as RocketMQ's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from skiff.common.hashing import tag_hash
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import read_head, read_tail
from skiff.common.sysflag import MessageSysFlag
from skiff.store.commitlog import CommitLog
from skiff.store.consume_queue import ConsumeQueueTable, Entry
from skiff.store.index_service import IndexService

NOT_CONSUMABLE = int(MessageSysFlag.TRANSACTION_PREPARED)
"""sysFlag bit set by both PREPARED (0x4) and ROLLBACK (0xC); NOT (0) and COMMIT (0x8) lack it.
A plain int: `&` with an IntFlag member goes through enum code, ten times slower."""

RECOVERY_CHUNK = 1024
"""Records parsed per dispatch call when rebuilding from the CommitLog."""


def consumable(sys_flag: int) -> bool:
    """Whether a record of this sysFlag goes into a ConsumeQueue (transaction type NOT or COMMIT)."""
    return not sys_flag & NOT_CONSUMABLE


class DispatchRequest(NamedTuple):
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    tag_code: int
    store_timestamp: int
    sys_flag: int
    keys: str | None
    uniq_key: str | None


QueueTouch = tuple[str, int, int]
"""(topic, queue id, new max offset) of a queue that got entries."""


def request_from_record(buf: memoryview | bytes, pos: int = 0) -> DispatchRequest:
    """Parse the dispatch fields of the (validated) record at ``buf[pos]``."""
    head = read_head(buf, pos)
    tail = read_tail(buf, pos, head)
    props = decode_properties(tail.properties_raw)
    return DispatchRequest(
        tail.topic, head.queue_id, head.queue_offset, head.physical_offset, head.total_size,
        tag_hash(props.get(Prop.TAGS)), head.store_timestamp, head.sys_flag,
        props.get(Prop.KEYS), props.get(Prop.UNIQ_KEY),
    )


def requests_between(commitlog: CommitLog, start: int, end: int) -> Iterator[list[DispatchRequest]]:
    """Dispatch requests of the records in [start, end), in chunks."""
    chunk: list[DispatchRequest] = []
    for _, view in commitlog.iter_records(start, end):
        chunk.append(request_from_record(view))
        if len(chunk) >= RECOVERY_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Dispatcher:
    def __init__(self, queues: ConsumeQueueTable, index: IndexService | None) -> None:
        self.queues = queues
        self.index = index

    def reserve(self, entries: Mapping[tuple[str, int], int], keys: int) -> None:
        """Reserve room for what a coming append will dispatch (entries per queue, index
        keys), so that dispatching it cannot fail. Raises OSError when the disk is full."""
        for (topic, queue_id), count in entries.items():
            if count:
                self.queues.get_or_create(topic, queue_id).ensure_room(count)
        if keys and self.index is not None:
            self.index.ensure_room(keys)

    def dispatch(self, requests: Sequence[DispatchRequest]) -> list[QueueTouch]:
        """Write the ConsumeQueue and index entries of ``requests`` (in CommitLog order)."""
        touched: list[QueueTouch] = []
        run: list[Entry] = []
        run_topic, run_queue, expected = None, -1, -1
        for topic, queue_id, queue_offset, phys, size, tag, _, sys_flag, _, _ in requests:
            if sys_flag & NOT_CONSUMABLE:
                continue
            if queue_offset != expected or queue_id != run_queue or topic != run_topic:
                self._write_run(run_topic, run_queue, expected - len(run), run, touched)
                run, run_topic, run_queue = [], topic, queue_id
                expected = queue_offset
            run.append((phys, size, tag))
            expected += 1
        self._write_run(run_topic, run_queue, expected - len(run), run, touched)
        if self.index is not None:
            self.index.add(requests)
        if len(touched) > 1:  # one touch per queue, with its final max offset
            touched = [(t, q, m) for (t, q), m in {(t, q): m for t, q, m in touched}.items()]
        return touched

    def _write_run(
        self, topic: str | None, queue_id: int, first: int, run: list[Entry], touched: list[QueueTouch]
    ) -> None:
        if topic is not None and run:
            cq = self.queues.get_or_create(topic, queue_id)
            cq.append(first, run)
            touched.append((topic, queue_id, cq.max_offset))
