"""Reading what a slave receives from its master: whole records, checked, as dispatch columns.

A slave appends its master's CommitLog bytes as they arrive (`MessageStore.append_replicated`).
The bytes come cut at arbitrary points (frames end at 32 KiB and at file ends), so the
slave must find the whole records at the front, check each (magic, size, stored offset,
structure, body CRC: nothing unchecked reaches the CommitLog) and dispatch them into
ConsumeQueues and the index. `replicated_columns` does all three in one walk over the
bytes, reading only the three properties the dispatch needs (TAGS, KEYS, UNIQ_KEY) without
building a properties dict: on a slave this walk runs once per replicated message, and it
is the slave's main cost (docs/performance.md, "Replication").

`replicated_columns_py` is the definition; the compiled twin of the same name in
`skiff.store._kernels` must give identical results (`tests/unit/store/test_kernels.py`).
"""

from __future__ import annotations

from typing import Any

from skiff.common import kernels
from skiff.common.errors import DecodeError
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import BLANK_HEAD, BLANK_MAGIC, FIXED_BYTES_V4, MAGIC_V1, body_crc, read_head, read_tail
from skiff.store.commitlog import BLANK_MIN_BYTES, Slot, inspect_record
from skiff.store.dispatcher import DispatchBatch, TagCodes

Buffer = bytes | bytearray | memoryview
Columns = tuple[Any, ...]
"""(whole, bad, topics, queue ids, queue offsets, physical offsets, sizes, tags, store
timestamps, sys flags, keys, uniq keys): see `replicated_columns_py`."""


def replicated_columns_py(data: Buffer, start: int, file_size: int) -> Columns:
    """Walk the records and blanks at the front of ``data`` (CommitLog offset ``start``).

    Returns ``whole``, the bytes of the whole, valid units from the front (a unit cut by
    the end of ``data`` stops the walk: its rest has not arrived); ``bad``, where the first
    invalid unit starts (-1: none; then ``whole == bad``); and one list per dispatch field
    of the records among them (blanks, which pad a file's end, have none), TAGS as text."""
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [], [], [], [], [])
    pos, end = 0, len(data)
    while pos < end:
        phys = start + pos
        room = file_size - phys % file_size
        if room < BLANK_MIN_BYTES:
            return (pos, pos, *cols)
        if end - pos < BLANK_MIN_BYTES:
            break
        total, magic = BLANK_HEAD.unpack_from(data, pos)
        if not _plausible(total, magic, room):
            return (pos, pos, *cols)
        if end - pos < total:
            break
        if magic == MAGIC_V1:
            record = _record_fields(data, pos, phys)
            if record is None:
                return (pos, pos, *cols)
            for col, value in zip(cols, record):
                col.append(value)
        pos += total
    return (pos, -1, *cols)


replicated_columns = kernels.select("replicated_columns", replicated_columns_py, "skiff.store._kernels")


def _plausible(total: int, magic: int, room: int) -> bool:
    """What a unit's first 8 bytes allow: a blank fills its file's rest, a record fits in it."""
    if magic == BLANK_MAGIC:
        return total == room
    return magic == MAGIC_V1 and FIXED_BYTES_V4 < total <= room


def _record_fields(data: Buffer, pos: int, phys: int) -> tuple[Any, ...] | None:
    """The dispatch fields of the whole record at ``pos``, or None when it is invalid."""
    try:
        head = read_head(data, pos)
        tail = read_tail(data, pos, head)
    except DecodeError:
        return None
    if head.physical_offset != phys or head.queue_id < 0 or not tail.topic:
        return None
    if body_crc(data[tail.body_pos : tail.body_pos + tail.body_length]) != head.body_crc:
        return None
    props = decode_properties(tail.properties_raw)
    return (tail.topic, head.queue_id, head.queue_offset, phys, head.total_size, props.get(Prop.TAGS),
            head.store_timestamp, head.sys_flag, props.get(Prop.KEYS), props.get(Prop.UNIQ_KEY))


def replicated_batch(data: Buffer, start: int, file_size: int, tag_codes: TagCodes, *,
                     hold_partial: bool) -> tuple[int, DispatchBatch]:
    """The bytes of whole units at the front of ``data`` and their `DispatchBatch`.

    Raises DecodeError naming the first invalid unit, and, unless ``hold_partial``, when
    ``data`` ends inside one."""
    whole, bad, topics, queue_ids, queue_offsets, physical_offsets, sizes, tags, store_ts, sys_flags, keys, \
        uniq_keys = replicated_columns(data, start, file_size)
    if bad >= 0:
        raise DecodeError(f"replicated data: {_what_is_wrong(data, bad, start + bad, file_size)}")
    if whole < len(data) and not hold_partial:
        raise DecodeError(f"replicated data ends inside the record at offset {start + whole}")
    return whole, DispatchBatch(topics=topics, queue_ids=queue_ids, queue_offsets=queue_offsets,
                                physical_offsets=physical_offsets, sizes=sizes,
                                tag_codes=list(map(tag_codes.__getitem__, tags)), store_timestamps=store_ts,
                                sys_flags=sys_flags, keys=keys, uniq_keys=uniq_keys)


def _what_is_wrong(data: Buffer, pos: int, phys: int, file_size: int) -> str:
    room = min(file_size - phys % file_size, len(data) - pos)
    found = inspect_record(data, pos, phys, room)
    if found.kind is Slot.END:
        return f"zeros at offset {phys}"
    return found.reason or f"a unit at offset {phys} that does not fit its file"
