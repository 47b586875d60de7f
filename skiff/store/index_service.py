"""The set of IndexFiles under `index/`: which file takes new keys, and queries across files.

Files are named by their creation time, ``yyyyMMddHHmmssSSS`` in local time as
RocketMQ names them (bumped by 1 ms when two would share a name), so name order
is creation order. The newest file takes new keys until it holds `maxIndexNum`
entries; then a new file starts.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING
from zlib import crc32

from skiff.common import kernels
from skiff.common.clock import Clock
from skiff.common.hashing import index_key_hash
from skiff.common.properties import KEY_SEPARATOR
from skiff.common.sysflag import TRANSACTION_TYPE_MASK, MessageSysFlag
from skiff.store.index_file import IndexFile

if TYPE_CHECKING:
    from skiff.store.dispatcher import DispatchBatch

log = logging.getLogger(__name__)

_NAME = re.compile(r"^\d{17}$")
_TX_MASK = TRANSACTION_TYPE_MASK
_ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
_HASH_MASK = 0x7FFFFFFF
_PREFIXES_MAX = 65536


def index_items(batch: DispatchBatch, end_phys: int, prefixes: KeyPrefixes) -> list[int]:
    """The keys of the records at or past ``end_phys``, in CommitLog order, flat: key hash,
    CommitLog offset, store time, key hash, ... (`index_key_items`)."""
    topics, _, _, physical_offsets, _, _, store_timestamps, sys_flags, keys_column, uniq_keys, _ = batch
    return record_items(topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys, end_phys,
                        prefixes)


def record_items(topics: Sequence[str], physical_offsets: Sequence[int], store_timestamps: Sequence[int],
                 sys_flags: Sequence[int], keys_column: Sequence[str | None], uniq_keys: Sequence[str | None],
                 end_phys: int, prefixes: KeyPrefixes) -> list[int]:
    """`index_items` of records given as columns."""
    return index_key_items(topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys,
                           bisect.bisect_left(physical_offsets, end_phys), prefixes)


def index_key_items_py(topics: Sequence[str], physical_offsets: Sequence[int], store_timestamps: Sequence[int],
                       sys_flags: Sequence[int], keys_column: Sequence[str | None],
                       uniq_keys: Sequence[str | None], start: int, prefixes: Mapping[str, int]) -> list[int]:
    """The keys of the records from number ``start`` on, flat (see `index_items`). The hash
    of ``topic#key`` continues the CRC of ``topic#`` (``prefixes``), so it is one ``crc32``
    call per key."""
    items: list[int] = []
    columns = (topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys)
    for topic, phys, store_ts, sys_flag, keys, uniq in zip(*(c[start:] for c in columns) if start else columns):
        if sys_flag & _TX_MASK == _ROLLBACK:
            continue
        prefix = prefixes[topic]
        if uniq:
            items += (crc32(uniq.encode(), prefix) & _HASH_MASK, phys, store_ts)
        if keys:
            for key in keys.split(KEY_SEPARATOR):
                if key:
                    items += (crc32(key.encode(), prefix) & _HASH_MASK, phys, store_ts)
    return items


index_key_items = kernels.select("index_key_items", index_key_items_py, "skiff.store._kernels")


class KeyPrefixes(dict[str, int]):
    """CRC-32 of ``topic#`` by topic (`index_key_hash` continued from it gives the same hash)."""

    def __missing__(self, topic: str) -> int:
        if len(self) >= _PREFIXES_MAX:
            self.clear()
        prefix = self[topic] = crc32(f"{topic}#".encode())
        return prefix


def _time_name(now_ms: int) -> str:
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms // 1000)) + f"{now_ms % 1000:03d}"


class IndexService:
    def __init__(self, directory: str, slots: int, capacity: int, clock: Clock) -> None:
        self.directory = directory
        self.slots = slots
        self.capacity = capacity
        self.clock = clock
        self.files: tuple[IndexFile, ...] = ()
        self._unsynced: list[IndexFile] = []
        self.prefixes = KeyPrefixes()
        self._lock = threading.Lock()

    def load(self) -> list[str]:
        """Open the files on disk. An empty newest file is what a crash during its creation
        leaves; it is removed."""
        if not os.path.isdir(self.directory):
            return []
        names = sorted(n for n in os.listdir(self.directory) if _NAME.match(n))
        notes = []
        if names and os.path.getsize(os.path.join(self.directory, names[-1])) == 0:
            notes.append(f"removed the empty index file {names[-1]} (its creation was cut short)")
            os.unlink(os.path.join(self.directory, names.pop()))
        self.files = tuple(
            IndexFile.open(os.path.join(self.directory, n), self.slots, self.capacity) for n in names
        )
        return notes

    @property
    def end_phy_offset(self) -> int:
        files = self.files
        return files[-1].end_phy_offset if files and files[-1].index_count > 1 else -1

    def _roll(self) -> IndexFile:
        """Start a new file. Raises OSError when the disk has no room for it."""
        os.makedirs(self.directory, exist_ok=True)
        name = _time_name(self.clock.now_ms())
        if self.files and name <= self.files[-1].name:
            name = str(int(self.files[-1].name) + 1)
        new = IndexFile.create(os.path.join(self.directory, name), self.slots, self.capacity)
        with self._lock:
            if self.files:
                self._unsynced.append(self.files[-1])
            self.files = (*self.files, new)
        return new

    def ensure_room(self, keys: int) -> None:
        """Make sure the next ``keys`` keys have reserved room. Raises OSError (disk full)."""
        files = self.files
        current = files[-1] if files else None
        # `IndexFile.room` without its call: an append asks this once per put.
        if current is None or current.capacity - current.index_count < min(keys, self.capacity - 1):
            current = self._roll()
        current.ensure_room(keys)  # no syscall unless a new chunk is due

    def add(self, batch: DispatchBatch) -> None:
        """Index the KEYS words and the UNIQ_KEY of each record (rolled-back transactions
        excepted). Records below the newest indexed offset were indexed before and are skipped."""
        topics, _, _, physical_offsets, _, _, store_timestamps, sys_flags, keys_column, uniq_keys, _ = batch
        self.add_records(topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys)

    def add_records(self, topics: Sequence[str], physical_offsets: Sequence[int], store_timestamps: Sequence[int],
                    sys_flags: Sequence[int], keys_column: Sequence[str | None],
                    uniq_keys: Sequence[str | None]) -> None:
        """`add` of records given as those columns (an append has them without a `DispatchBatch`).

        A lone send's append comes here once per put: `end_phy_offset`, `record_items`,
        `IndexFile.full` and `IndexFile.room` are inlined (four Python calls a put)."""
        files = self.files
        current = files[-1] if files else None
        end_phys = current.end_phy_offset if current is not None and current.index_count > 1 else -1
        items = index_key_items(topics, physical_offsets, store_timestamps, sys_flags, keys_column, uniq_keys,
                                bisect.bisect_left(physical_offsets, end_phys), self.prefixes)
        while items:
            current = self.files[-1] if self.files else None
            if current is None or current.index_count >= current.capacity:
                current = self._roll()
            room = current.capacity - current.index_count
            if 3 * room >= len(items):
                current.ensure_room(len(items) // 3)
                current.put_many(items)
                return
            current.ensure_room(room)
            current.put_many(items[: 3 * room])
            items = items[3 * room :]

    def query(self, topic: str, key: str, begin_ms: int, end_ms: int) -> Iterator[int]:
        """CommitLog offsets that may hold ``key``, newest first (hash matches: verify them)."""
        key_hash = index_key_hash(topic, key)
        for f in reversed(self.files):
            if f.overlaps(begin_ms, end_ms):
                yield from f.offsets(key_hash, begin_ms, end_ms)

    def truncate_phys(self, phys_end: int) -> int:
        """Remove entries at or past ``phys_end``: whole files, then the tail of the last kept one."""
        removed = 0
        with self._lock:
            keep = tuple(f for f in self.files if f.index_count <= 1 or f.begin_phy_offset < phys_end)
            gone = [f for f in self.files if f not in keep]
            self.files = keep
        for f in gone:
            removed += f.index_count - 1
            f.destroy()
        if keep:
            removed += keep[-1].truncate_phys(phys_end)
        return removed

    def delete_below_phys(self, min_phys: int) -> int:
        """Delete files (never the newest) whose entries all point below ``min_phys``."""
        with self._lock:
            files = self.files
            count = 0
            while count < len(files) - 1 and files[count].end_phy_offset < min_phys:
                count += 1
            gone, self.files = files[:count], files[count:]
            self._unsynced = [f for f in self._unsynced if f not in gone]
        for f in gone:
            f.destroy()
        return len(gone)

    def flush(self) -> None:
        with self._lock:
            pending, self._unsynced = self._unsynced, []
            files = self.files
        for f in [*pending, *files[-1:]]:
            f.sync()

    def close(self) -> None:
        with self._lock:
            files, self.files = self.files, ()
        for f in files:
            f.close()
