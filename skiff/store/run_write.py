"""One queue's run of records appended in one compiled call: the CommitLog records, their
ConsumeQueue entries and their index entries (`write_run`).

A lone send's append used to lay its bytes down in six Python frames and five kernel calls
(`CommitLog.append`, `MappedFile.write`, `Dispatcher.dispatch_run`, `ConsumeQueue.append`,
`IndexService.add_records`, `IndexFile.put_many`; the record packing, the message ids, the
ConsumeQueue entries, the index keys and the index entries): each of those costs about as much
as the work it wraps when the run is one message (docs/performance.md, "Eighth round").
Here the decisions stay in Python and the bytes are one call:

- `RunWriter.write` checks that each of the three places the run goes is one file with room
  already reserved (`MessageStore._append` reserved it: `Dispatcher.reserve_run`,
  `CommitLog.place`), computes the positions, makes the `write_run` call, then moves the
  CommitLog's write position, the queue's max offset and the index file's counters as
  `CommitLog.append`, `ConsumeQueue.append` and `IndexFile.put_many` would have;
- where one is not (a run that crosses a ConsumeQueue file, an index file without room for
  every key, a queue whose next offset is not the run's first), it writes nothing and says
  so (None): the caller takes the general path, which writes the same bytes.

`write_run` (compiled in `skiff.store._kernels`, this module's `write_run_py` the reference)
checks every bound before the first byte is written, so a run is written whole or not at all
(an OSError from ``pwrite`` leaves the ConsumeQueue and the index untouched, as before).
"""

from __future__ import annotations

import itertools
import mmap
import os
import struct
from collections.abc import Mapping, Sequence

from skiff.common import kernels
from skiff.common.record import pack_records
from skiff.store.commitlog import CommitLog
from skiff.store.config import CQ_ENTRY_BYTES
from skiff.store.consume_queue import ConsumeQueue, put_queue_entries_py
from skiff.store.index_file import ENTRY, HEADER, SLOT, put_index_entries_py
from skiff.store.index_service import IndexService, index_key_items_py
from skiff.store.mapped_file import MappedFile
from skiff.store.results import MessageInput

_OFFSET = struct.Struct(">q")
_INDEX_ENTRY_BYTES = ENTRY.size
_SLOTS_AT = HEADER.size

Written = tuple[list[int], tuple[str, ...]]
"""A written run's CommitLog offsets and message ids."""


def offset_msg_ids_py(store_host: bytes, offsets: Sequence[int]) -> tuple[str, ...]:
    """`skiff.common.msgid.create_offset_msg_id` of each offset: one hex encoding for the
    batch, then a slice per message."""
    width = 2 * (len(store_host) + _OFFSET.size)
    text = b"".join(map(store_host.__add__, map(_OFFSET.pack, offsets))).hex().upper()
    return tuple([text[i : i + width] for i in range(0, len(text), width)])


offset_msg_ids = kernels.select("offset_msg_ids", offset_msg_ids_py, "skiff.store._kernels")


def write_run_py(rows: Sequence[MessageInput], topic_raw: bytes, base: int, sizes: list[int], total: int,
                 store_timestamp: int, store_host: bytes, packed: bytearray, fd: int, file_pos: int, phys: int,
                 cq_mm: mmap.mmap | memoryview, cq_pos: int, tag_codes: list[int], ix_mm: mmap.mmap | memoryview | None,
                 slots: int, entry_pos: int, number: int, begin: int, prefixes: Mapping[str, int] | None, room: int
                 ) -> tuple[list[int], tuple[str, ...], int, int, int, int]:
    """Write a run of records of one topic and queue (queue offsets from ``base``) at CommitLog
    offset ``phys``, which is ``file_pos`` in the file open as ``fd``: packed into ``packed``,
    then ``pwrite``; their ConsumeQueue entries at ``cq_pos`` of ``cq_mm``; with ``ix_mm``, the
    keys of their UNIQ_KEY and KEYS (``prefixes``: the topic's CRC prefix) as index entries
    from entry ``number`` at ``entry_pos`` (at most ``room``; ``begin``: the file's begin time).
    Returns (offsets, message ids, index entries written, index slots newly used, the first
    and the last indexed offset, -1 when none). Every bound is checked before anything is
    written (ValueError)."""
    n = len(rows)
    if n == 0 or len(sizes) != n or len(tag_codes) != n:
        raise ValueError("a run has one size and one tag code per record, and at least one record")
    offsets = list(itertools.accumulate(sizes[:-1], initial=phys))
    if sum(sizes) != total:
        raise ValueError(f"the sizes add up to {sum(sizes)} bytes, not {total}")
    pack_records(rows, topic_raw, range(base, base + n), offsets, sizes, store_timestamp, store_host, None, packed, 0)
    ids = offset_msg_ids_py(store_host, offsets)
    if cq_pos < 0 or cq_pos + CQ_ENTRY_BYTES * n > len(cq_mm):
        raise ValueError("the ConsumeQueue entries do not fit in the file")
    items: list[int] = []
    if ix_mm is not None:
        topic = rows[0][0]
        assert prefixes is not None, "the index's key prefixes come with its file"
        items = index_key_items_py([topic] * n, offsets, [store_timestamp] * n, [r[5] for r in rows],
                                   [r[11] for r in rows], [r[12] for r in rows], 0, prefixes)
        count = len(items) // 3
        if (count > room or slots <= 0 or entry_pos < _SLOTS_AT + SLOT.size * slots
                or entry_pos + _INDEX_ENTRY_BYTES * count > len(ix_mm)):
            raise ValueError("the index entries do not fit in the file")
    if total > len(packed):
        raise ValueError(f"{total} bytes of records do not fit in a buffer of {len(packed)}")
    view = memoryview(packed)[:total]
    done = os.pwrite(fd, view, file_pos)
    while done < total:  # a short write (a signal, a nearly full disk): the rest
        done += os.pwrite(fd, view[done:], file_pos + done)
    put_queue_entries_py(cq_mm, cq_pos, offsets, sizes, tag_codes, 0, n)
    count = len(items) // 3
    if not count:
        return offsets, ids, 0, 0, -1, -1
    added = put_index_entries_py(ix_mm, slots, entry_pos, number, items, count, begin)  # type: ignore[arg-type]
    return offsets, ids, count, added, items[1], items[3 * count - 2]


write_run = kernels.select("write_run", write_run_py, "skiff.store._kernels")


class RunWriter:
    """The one-call append of a run of consumed records of one queue (see the module docstring)."""

    def __init__(self, commitlog: CommitLog, index: IndexService | None) -> None:
        self.commitlog = commitlog
        self.index = index

    def write(self, f: MappedFile, cq: ConsumeQueue, msgs: Sequence[MessageInput], topic_raw: bytes, base: int,
              sizes: list[int], total: int, store_ts: int, tag_codes: list[int], key_count: int) -> Written | None:
        """Write ``msgs`` (checked; queue offsets from ``base``) at the CommitLog's write position
        in ``f`` (`CommitLog.place`), into ``cq`` and the index (room reserved for ``key_count``
        keys); None, with nothing written, where a place is not one file with room."""
        n = len(msgs)
        pos = base * CQ_ENTRY_BYTES
        cq_files = cq.files.files
        cf = cq_files[-1] if cq_files else None
        if (cf is None or base != cq.max_offset or pos < cf.start
                or pos + n * CQ_ENTRY_BYTES > min(cf.start + cf.size, cq.room_end)):
            return None
        commitlog = self.commitlog
        phys = commitlog.write_pos
        index = self.index
        ix = ix_mm = None
        slots = entry_pos = number = begin = room = 0
        if key_count and index is not None:
            ix = index.files[-1] if index.files else None
            if ix is None:
                return None
            number = ix.index_count
            room = ix.capacity - number
            entry_pos = ix.entries_at + number * _INDEX_ENTRY_BYTES
            if (room < key_count or entry_pos + key_count * _INDEX_ENTRY_BYTES > ix.file.reserved
                    or (number > 1 and ix.end_phy_offset >= phys)):
                return None
            ix_mm, slots = ix.file.mm, ix.slots
            begin = store_ts if number == 1 else ix.begin_timestamp  # put_many's: the first key's time
        packed = commitlog.packed
        if len(packed) < total:
            packed = commitlog.packed = bytearray(total)
        offsets, ids, count, added, first_key, last_key = write_run(
            msgs, topic_raw, base, sizes, total, store_ts, commitlog.store_host, packed, f.fd, phys - f.start, phys,
            cf.mm, pos - cf.start, tag_codes, ix_mm, slots, entry_pos, number, begin,
            index.prefixes if index is not None else None, room)
        commitlog.write_pos = phys + total
        cq.max_offset = base + n
        if count:  # `IndexFile.put_many`'s bookkeeping
            assert ix is not None
            if number == 1:
                ix.begin_phy_offset, ix.begin_timestamp = first_key, store_ts
            ix.end_phy_offset, ix.end_timestamp = last_key, store_ts
            ix.hash_slot_count += added
            ix.index_count = number + count
        return offsets, ids
