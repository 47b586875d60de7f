"""ConsumeQueue files hold one descriptor each (the mapping's), so 16,384 queues fit
a 20,000-descriptor limit: see skiff/store/mapped_file.py."""

import os

from skiff.store.config import CQ_ENTRY_BYTES
from skiff.store.consume_queue import ConsumeQueueTable

ENTRIES_PER_FILE = 16


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fill(table: ConsumeQueueTable, queues: int, entries: int) -> None:
    for q in range(queues):
        offsets = list(range(q * 10_000, q * 10_000 + entries * 100, 100))
        table.get_or_create("T", q).append(0, offsets, [90] * entries, [q] * entries)


def test_each_consume_queue_file_holds_one_descriptor_and_keeps_its_entries(tmp_path):
    directory = str(tmp_path / "consumequeue")
    before = _open_descriptors()
    table = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    _fill(table, 40, 3)  # one file each
    spanning = 2 * ENTRIES_PER_FILE + 1  # three files
    table.get_or_create("T", 40).append(0, list(range(0, spanning * 100, 100)), [90] * spanning, [1] * spanning)
    assert sum(len(cq.files.files) for cq in table.all()) == 43
    assert _open_descriptors() - before == 43
    table.flush()  # msync, or syncfs / fdatasync through a briefly opened path
    assert _open_descriptors() - before == 43
    table.close()
    assert _open_descriptors() == before

    reloaded = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    reloaded.load()  # pread / SEEK_DATA open each file briefly
    assert _open_descriptors() - before == 43
    assert [reloaded.get("T", q).entry(2) for q in (0, 39)] == [(200, 90, 0), (390_200, 90, 39)]
    last = reloaded.get("T", 40)
    assert (last.min_offset, last.max_offset, last.entry(32)) == (0, 33, (3_200, 90, 1))
    last.append(33, [3_300], [90], [1])  # grows its reservation through the path
    assert last.entry(33) == (3_300, 90, 1)
    reloaded.close()
    assert _open_descriptors() == before
