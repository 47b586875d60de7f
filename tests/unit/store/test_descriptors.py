"""ConsumeQueue files hold one descriptor each (the mapping's), so 16,384 queues fit
a 20,000-descriptor limit: see skiff/store/mapped_file.py."""

import os

import pytest

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


def test_a_prepared_empty_queue_file_holds_nothing_loads_empty_and_takes_writes(tmp_path):
    directory = str(tmp_path / "consumequeue")
    before = _open_descriptors()
    table = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    assert table.prepare("T", 3) == 3
    first = os.path.join(directory, "T", "1", "0" * 20)
    assert os.path.getsize(first) == CQ_ENTRY_BYTES * ENTRIES_PER_FILE
    assert _open_descriptors() == before  # made, sized, closed: not mapped
    table.get_or_create("T", 0).append(0, [500, 600], [90, 90], [7, 7])  # adopts the prepared file
    assert _open_descriptors() - before == 1
    table.close()

    reloaded = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    reloaded.load()
    assert _open_descriptors() - before == 1  # only the written queue maps its file
    assert [(reloaded.get("T", q).min_offset, reloaded.get("T", q).max_offset) for q in range(3)] == [
        (0, 2), (0, 0), (0, 0)]
    assert reloaded.get("T", 0).entry(1) == (600, 90, 7)
    empty = reloaded.get("T", 1)
    assert empty.read(0, 4) is None
    empty.append(0, [700, 800, 900], [80] * 3, [5] * 3)  # the prepared file, adopted after the restart
    assert [empty.entry(i) for i in range(3)] == [(700, 80, 5), (800, 80, 5), (900, 80, 5)]
    assert os.listdir(os.path.dirname(first)) == ["0" * 20]
    reloaded.close()
    assert _open_descriptors() == before


def test_a_queue_file_with_data_is_never_adopted_as_a_prepared_one(tmp_path):
    directory = str(tmp_path / "consumequeue")
    table = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    table.get_or_create("T", 0).append(0, [500], [90], [7])
    table.flush()
    stranger = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)  # not loaded: knows no file
    with pytest.raises(FileExistsError):
        stranger.get_or_create("T", 0).append(0, [100], [90], [1])
    table.close()
    stranger.close()
    again = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    again.load()
    assert (again.get("T", 0).max_offset, again.get("T", 0).entry(0)) == (1, (500, 90, 7))
    again.close()
