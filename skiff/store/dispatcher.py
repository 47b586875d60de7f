"""The dispatcher: the one code path that turns CommitLog records into ConsumeQueue and
index entries.

Its input is a `DispatchBatch`: the dispatch fields of consecutive records as
columns. The append path builds one from what it has just written (the broker
parsed tags and keys already), so a batch of one queue becomes one ConsumeQueue
write and one index write without a per-message object; recovery parses
records (`request_from_record`) and transposes them (`DispatchBatch.of`); a slave
reads its master's bytes into columns (`skiff.store.replicated`). Either way the
same `Dispatcher.dispatch` writes the entries.

Only records of transaction type NOT or COMMIT go into a ConsumeQueue: a
prepared or rolled-back message is stored, and found by its offset, but never
consumed. The index takes every type but ROLLBACK (as RocketMQ's).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

from skiff.common import kernels
from skiff.common.hashing import tag_hash
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import read_head, read_tail
from skiff.common.sysflag import MessageSysFlag
from skiff.store.commitlog import CommitLog
from skiff.store.consume_queue import ConsumeQueue, ConsumeQueueTable
from skiff.store.index_service import IndexService

NOT_CONSUMABLE = int(MessageSysFlag.TRANSACTION_PREPARED)
"""sysFlag bit set by both PREPARED (0x4) and ROLLBACK (0xC); NOT (0) and COMMIT (0x8) lack it.
A plain int: `&` with an IntFlag member goes through enum code, ten times slower."""

RECOVERY_CHUNK = 1024
"""Records parsed per dispatch call when rebuilding from the CommitLog."""

_TAG_CODES_MAX = 65536


class TagCodes(dict[str | None, int]):
    """`tag_hash` by TAGS value, remembered: a broker sees few distinct tags, and a batch's
    codes are then one ``map`` over a dict lookup."""

    def __missing__(self, tags: str | None) -> int:
        if len(self) >= _TAG_CODES_MAX:
            self.clear()
        code = self[tags] = tag_hash(tags)
        return code


class DispatchRequest(NamedTuple):
    """The dispatch fields of one record (what recovery parses); `DispatchBatch` has them as columns."""

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


@kernels.kernel_row
class DispatchBatch(NamedTuple):
    """Consecutive records in CommitLog order, one column per `DispatchRequest` field, and
    the ConsumeQueue writes they make (`queue_runs` finds them when the builder did not:
    an append knows its batch is one run).

    Read by slot here and in the compiled kernels' callers: its field order is checked at
    import against `skiff.common.kernels.ROW_LAYOUTS`. Build it by keyword, except on the
    append path (see `MessageStore._append`)."""

    topics: Sequence[str]
    queue_ids: Sequence[int]
    queue_offsets: Sequence[int]
    physical_offsets: Sequence[int]
    sizes: Sequence[int]
    tag_codes: Sequence[int]
    store_timestamps: Sequence[int]
    sys_flags: Sequence[int]
    keys: Sequence[str | None]
    uniq_keys: Sequence[str | None]
    runs: list[QueueRun] | None = None

    @classmethod
    def of(cls, requests: Sequence[DispatchRequest]) -> DispatchBatch:
        if not requests:
            return cls(topics=(), queue_ids=(), queue_offsets=(), physical_offsets=(), sizes=(), tag_codes=(),
                       store_timestamps=(), sys_flags=(), keys=(), uniq_keys=(), runs=[])
        (topics, queue_ids, queue_offsets, physical_offsets, sizes, tag_codes, store_timestamps, sys_flags, keys,
         uniq_keys) = zip(*requests)  # DispatchRequest's order
        return cls(topics=topics, queue_ids=queue_ids, queue_offsets=queue_offsets, physical_offsets=physical_offsets,
                   sizes=sizes, tag_codes=tag_codes, store_timestamps=store_timestamps, sys_flags=sys_flags,
                   keys=keys, uniq_keys=uniq_keys)

    @property
    def end(self) -> int:
        """The CommitLog offset after the last record."""
        return self.physical_offsets[-1] + self.sizes[-1]


class QueueRun(NamedTuple):
    """ConsumeQueue entries for consecutive offsets of one queue."""

    topic: str
    queue_id: int
    first_offset: int
    physical_offsets: Sequence[int]
    sizes: Sequence[int]
    tag_codes: Sequence[int]


QueueTouch = tuple[str, int, int]
"""(topic, queue id, new max offset) of a queue that got entries."""


def queue_runs(batch: DispatchBatch) -> list[QueueRun]:
    """The ConsumeQueue writes ``batch`` needs: runs of consecutive offsets of one queue."""
    runs = batch[-1]
    return _split_runs(batch) if runs is None else runs


def _split_runs(batch: DispatchBatch) -> list[QueueRun]:
    runs: list[QueueRun] = []
    expected = -1
    key: tuple[str, int] | None = None
    phys_run: list[int] = []
    size_run: list[int] = []
    tag_run: list[int] = []
    for topic, queue_id, queue_offset, phys, size, tag, _, sys_flag in zip(*batch[:8]):
        if sys_flag & NOT_CONSUMABLE:
            continue
        if queue_offset != expected or (topic, queue_id) != key:
            key, expected = (topic, queue_id), queue_offset
            phys_run, size_run, tag_run = [], [], []
            runs.append(QueueRun(topic, queue_id, queue_offset, phys_run, size_run, tag_run))
        phys_run.append(phys)
        size_run.append(size)
        tag_run.append(tag)
        expected += 1
    return runs


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


def batches_between(commitlog: CommitLog, start: int, end: int) -> Iterator[DispatchBatch]:
    """The records in [start, end), parsed, in batches of at most `RECOVERY_CHUNK`."""
    chunk: list[DispatchRequest] = []
    for _, view in commitlog.iter_records(start, end):
        chunk.append(request_from_record(view))
        if len(chunk) >= RECOVERY_CHUNK:
            yield DispatchBatch.of(chunk)
            chunk = []
    if chunk:
        yield DispatchBatch.of(chunk)


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

    def reserve_run(self, topic: str, queue_id: int, count: int, keys: int) -> ConsumeQueue | None:
        """`reserve` for an append to one queue (``count`` entries: none when every record is
        a transaction's half, and then no queue is made); return that queue."""
        cq = None
        if count:
            # `ConsumeQueueTable.get_or_create`'s lookup first: one call fewer per put.
            cq = self.queues.queues.get((topic, queue_id)) or self.queues.get_or_create(topic, queue_id)
            cq.ensure_room(count)
        if keys and self.index is not None:
            self.index.ensure_room(keys)
        return cq

    def reserve_for(self, batch: DispatchBatch) -> None:
        """`reserve` what dispatching ``batch`` will write."""
        counts: dict[tuple[str, int], int] = {}
        for run in queue_runs(batch):
            key = (run.topic, run.queue_id)
            counts[key] = counts.get(key, 0) + len(run.sizes)
        self.reserve(counts, key_count(batch.keys, batch.uniq_keys))

    def dispatch(self, batch: DispatchBatch) -> list[QueueTouch]:
        """Write the ConsumeQueue and index entries of ``batch``; return one touch per queue grown."""
        touched: list[QueueTouch] = []
        for topic, queue_id, first, physical_offsets, sizes, tag_codes in queue_runs(batch):
            cq = self.queues.get_or_create(topic, queue_id)
            cq.append(first, physical_offsets, sizes, tag_codes)
            touched.append((topic, queue_id, cq.max_offset))
        if self.index is not None:
            self.index.add(batch)
        if len(touched) > 1:  # one touch per queue, with its final max offset
            touched = [(t, q, m) for (t, q), m in {(t, q): m for t, q, m in touched}.items()]
        return touched

    def dispatch_run(self, cq: ConsumeQueue | None, first: int, physical_offsets: Sequence[int], sizes: Sequence[int],
                     tag_codes: Sequence[int], store_timestamp: int, sys_flags: Sequence[int],
                     keys: Sequence[str | None], uniq_keys: Sequence[str | None], key_count: int) -> list[QueueTouch]:
        """`dispatch` of an append whose records all go into ``cq`` (from `reserve_run`) from
        offset ``first`` on, stored at one time: the same entries, without a column per field
        (what a lone send's append would spend most of its dispatch building). ``key_count``:
        the index keys the records can have at most; none, and the index is not asked."""
        assert cq is not None, "an append of consumed records reserves its queue"
        cq.append(first, physical_offsets, sizes, tag_codes)
        if key_count and self.index is not None:
            n = len(physical_offsets)
            self.index.add_records((cq.topic,) * n, physical_offsets, (store_timestamp,) * n, sys_flags, keys,
                                   uniq_keys)
        return [(cq.topic, cq.queue_id, cq.max_offset)]


def key_count(keys: Sequence[str | None], uniq_keys: Sequence[str | None]) -> int:
    """How many index keys these records can have at most (room to reserve)."""
    count = len(uniq_keys) - uniq_keys.count(None)
    if keys.count(None) != len(keys):
        count += sum(k.count(" ") + 1 for k in keys if k)
    return count
