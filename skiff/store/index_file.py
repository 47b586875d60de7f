"""The IndexFile: RocketMQ's on-disk hash table from message keys to CommitLog offsets.

One file holds a 40-byte header, `maxHashSlotNum` slots of 4 bytes and
`maxIndexNum` entries of 20 bytes (big-endian). Keys hash with
`skiff.common.hashing.index_key_hash(topic, key)`; slot = hash % slot count. A
slot holds the number of the newest entry with that slot (0 = empty); each entry
holds the number of the previous one, so a lookup walks a chain from newest to
oldest. Entry 0 is never used.

Header (``HEADER``):

| offset | size | field                                                    |
|--------|------|----------------------------------------------------------|
| 0      | 8    | beginTimestamp: store time of the first entry (ms)       |
| 8      | 8    | endTimestamp: store time of the last entry (ms)          |
| 16     | 8    | beginPhyOffset: CommitLog offset of the first entry      |
| 24     | 8    | endPhyOffset: CommitLog offset of the last entry         |
| 32     | 4    | hashSlotCount: slots in use                              |
| 36     | 4    | indexCount: the next entry number (starts at 1)          |

Slot: int32 entry number. Entry (``ENTRY``):

| offset | size | field                                                       |
|--------|------|-------------------------------------------------------------|
| 0      | 4    | keyHash (int32, non-negative)                               |
| 4      | 8    | CommitLog offset (int64)                                    |
| 12     | 4    | timeDiff: seconds from beginTimestamp to the store time     |
| 16     | 4    | previous entry number in the same slot (0 = none)           |

Entries are appended in CommitLog order, so their offsets never decrease; that
is what lets recovery cut the entries past a point and re-link the slots. The
header and slots are reserved when the file is created and the entries region
ahead of its write position, so a full disk is an OSError, not SIGBUS.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator, Sequence

import numpy as np

from skiff.common import kernels
from skiff.common.errors import ConfigError
from skiff.store.mapped_file import MappedFile

HEADER = struct.Struct(">qqqqii")
assert HEADER.size == 40
SLOT = struct.Struct(">i")
assert SLOT.size == 4
ENTRY = struct.Struct(">iqii")
assert ENTRY.size == 20
ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("offset", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])
assert ENTRY_DTYPE.itemsize == ENTRY.size
_INT32_MAX = 2**31 - 1
_SLOTS_AT, _SLOT_BYTES, _ENTRY_BYTES = HEADER.size, SLOT.size, ENTRY.size


def index_file_size(slots: int, entries: int) -> int:
    return HEADER.size + slots * SLOT.size + entries * ENTRY.size


class IndexFile:
    """One index file; ``put`` adds a key, ``offsets`` walks a key's chain."""

    def __init__(self, f: MappedFile, slots: int, capacity: int) -> None:
        self.file = f
        self.slots = slots
        self.capacity = capacity
        self.entries_at = HEADER.size + slots * SLOT.size
        self.begin_timestamp: int
        self.end_timestamp: int
        self.begin_phy_offset: int
        self.end_phy_offset: int
        self.hash_slot_count: int
        self.index_count: int
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = HEADER.unpack_from(f.mm, 0)
        self.index_count = min(max(self.index_count, 1), capacity)

    @classmethod
    def create(cls, path: str, slots: int, capacity: int) -> IndexFile:
        """A new empty file with its header and slots reserved. Raises OSError (disk full)."""
        f = MappedFile.create(path, 0, index_file_size(slots, capacity),
                              reserve_bytes=HEADER.size + slots * SLOT.size)
        index = cls(f, slots, capacity)
        index.write_header()
        return index

    @classmethod
    def open(cls, path: str, slots: int, capacity: int) -> IndexFile:
        size = index_file_size(slots, capacity)
        if os.path.getsize(path) != size:
            raise ConfigError(
                f"{path} is {os.path.getsize(path)} bytes, but maxHashSlotNum={slots} and "
                f"maxIndexNum={capacity} make {size}; set them as when the file was written"
            )
        index = cls(MappedFile.open(path, 0, size), slots, capacity)
        index.file.reserved = index._entry_pos(index.index_count)
        return index

    @property
    def name(self) -> str:
        return os.path.basename(self.file.path)

    @property
    def full(self) -> bool:
        return self.index_count >= self.capacity

    def room(self) -> int:
        return self.capacity - self.index_count

    def _entry_pos(self, number: int) -> int:
        return self.entries_at + number * ENTRY.size

    def ensure_room(self, count: int) -> None:
        """Reserve the blocks for ``count`` more entries (as many as fit). Raises OSError."""
        upto = self.entries_at + min(self.capacity, self.index_count + count) * _ENTRY_BYTES  # `_entry_pos`
        if upto > self.file.reserved:  # its test, without its call: appends ask twice (reserve, then add)
            self.file.ensure_reserved(upto)

    def put_many(self, items: Sequence[int]) -> None:
        """Add keys given flat as (key hash, CommitLog offset, store time) triples, as many
        as `room` allows. The header is written by `sync` (before each fsync), not here: a
        write into the header page while the kernel writes it back waits for that I/O, on
        the appending thread with the GIL held. A crash leaves a header older than the
        entries; recovery re-links the slots naming entries past its count and re-indexes
        from the checkpoint, which an fsync with its header precedes."""
        number = self.index_count
        count = min(len(items) // 3, self.capacity - number)
        if count <= 0:
            return
        if number == 1:
            self.begin_phy_offset, self.begin_timestamp = items[1], items[2]
        at = self.entries_at + number * _ENTRY_BYTES  # `_entry_pos`, without its call on every put
        self.hash_slot_count += put_index_entries(self.file.mm, self.slots, at, number, items, count,
                                                  self.begin_timestamp)
        self.end_phy_offset, self.end_timestamp = items[3 * count - 2], items[3 * count - 1]
        self.index_count = number + count

    def write_header(self) -> None:
        HEADER.pack_into(
            self.file.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
            self.end_phy_offset, self.hash_slot_count, self.index_count,
        )

    def overlaps(self, begin_ms: int, end_ms: int) -> bool:
        return self.index_count > 1 and self.begin_timestamp <= end_ms and self.end_timestamp >= begin_ms - 999

    def offsets(self, key_hash: int, begin_ms: int, end_ms: int) -> Iterator[int]:
        """CommitLog offsets of entries with ``key_hash`` stored within [begin_ms, end_ms],
        newest first. Times are kept in whole seconds, so the caller checks the exact
        store time on the record; a hash match may also be another key."""
        mm = self.file.mm
        number = SLOT.unpack_from(mm, HEADER.size + (key_hash % self.slots) * SLOT.size)[0]
        count = self.index_count
        while 0 < number < count:
            h, phys, diff, prev = ENTRY.unpack_from(mm, self._entry_pos(number))
            second = self.begin_timestamp + diff * 1000
            if second + 999 < begin_ms:
                return
            if h == key_hash and second <= end_ms:
                yield phys
            if prev >= number:
                return
            number = prev

    def entries(self) -> np.ndarray:
        """Entries 1 to index_count - 1, as a view (entry 0 is never written, so its page
        may be unallocated: see mapped_file on reading holes)."""
        return np.frombuffer(self.file.mm, ENTRY_DTYPE, self.index_count - 1, self._entry_pos(1))

    def truncate_phys(self, phys_end: int) -> int:
        """Remove the entries whose CommitLog offset is at or after ``phys_end``, re-linking
        their slots to the older entries; return how many were removed."""
        self._relink_slots_above(self.index_count)
        offsets = self.entries()["offset"].astype(np.int64)
        keep = 1 + int(np.searchsorted(offsets, phys_end))
        removed = self.index_count - keep
        if removed:
            self._relink_slots_above(keep)
            self.index_count = keep
            if keep > 1:
                _, self.end_phy_offset, diff, _ = ENTRY.unpack_from(self.file.mm, self._entry_pos(keep - 1))
                self.end_timestamp = self.begin_timestamp + diff * 1000
            else:
                self.begin_timestamp = self.end_timestamp = self.begin_phy_offset = self.end_phy_offset = 0
            self.file.mm[self._entry_pos(keep) : self._entry_pos(keep + removed)] = bytes(removed * ENTRY.size)
        self.write_header()
        return removed

    def _relink_slots_above(self, keep: int) -> None:
        """Point every slot that names an entry numbered ``keep`` or more at the newest
        older entry of its chain (entries past a crash's header count included)."""
        slots = np.frombuffer(self.file.mm, np.dtype(">i4"), self.slots, HEADER.size)
        for slot in np.flatnonzero(slots >= keep).tolist():
            number = int(slots[slot])
            while number >= keep:
                prev = ENTRY.unpack_from(self.file.mm, self._entry_pos(number))[3] if number < self.capacity else 0
                number = prev if 0 <= prev < number else 0
            slots[slot] = number
            if number == 0:
                self.hash_slot_count = max(0, self.hash_slot_count - 1)
        del slots

    def sync(self) -> None:
        """Write the header, then fdatasync the file."""
        if self._header_written():
            self.file.sync()

    def close(self) -> None:
        self._header_written()
        self.file.close()

    def _header_written(self) -> bool:
        try:
            self.write_header()
        except ValueError:  # closed meanwhile: retention deleted the file
            return False
        return True

    def destroy(self) -> None:
        self.file.destroy()


def put_index_entries_py(mm: mmap.mmap | memoryview, slots: int, entry_pos: int, number: int, items: Sequence[int],
                         count: int, begin: int) -> int:
    """Write ``count`` entries from (key hash, offset, store time) triples at ``entry_pos``
    (entry ``number`` on), each linked to its slot's newest entry; return how many slots
    were empty before (the header's hashSlotCount grows by that)."""
    unpack_slot, pack_slot, pack_entry = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
    added = 0
    for i in range(0, 3 * count, 3):
        key_hash = items[i]
        slot_pos = _SLOTS_AT + key_hash % slots * _SLOT_BYTES
        prev = unpack_slot(mm, slot_pos)[0]
        if not 0 < prev < number:
            prev = 0
            added += 1
        diff = (items[i + 2] - begin) // 1000
        if diff < 0:
            diff = 0
        elif diff > _INT32_MAX:
            diff = _INT32_MAX
        pack_entry(mm, entry_pos, key_hash, items[i + 1], diff, prev)
        pack_slot(mm, slot_pos, number)
        number += 1
        entry_pos += _ENTRY_BYTES
    return added


put_index_entries = kernels.select("put_index_entries", put_index_entries_py, "skiff.store._kernels")
