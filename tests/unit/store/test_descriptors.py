"""ConsumeQueue files hold one descriptor each (the mapping's), so 16,384 queues fit
a 20,000-descriptor limit: see skiff/store/mapped_file.py."""

import os
import resource

import pytest

from skiff.store.config import CQ_ENTRY_BYTES
from skiff.store.consume_queue import FD_HEADROOM, ConsumeQueueTable, mapping_budget

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


def test_prepared_queues_are_mapped_at_creation_and_hold_nothing_after_a_restart_until_written(tmp_path):
    directory = str(tmp_path / "consumequeue")
    before = _open_descriptors()
    table = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    assert table.prepare("T", 3) == 3
    first = os.path.join(directory, "T", "1", "0" * 20)
    assert os.path.getsize(first) == CQ_ENTRY_BYTES * ENTRIES_PER_FILE
    assert _open_descriptors() - before == 3  # made, reserved and mapped ahead of the first message
    assert [(cq.topic, cq.queue_id, cq.max_offset) for cq in table.all()] == [("T", 0, 0), ("T", 1, 0), ("T", 2, 0)]
    assert table.prepare("T", 3) == 0
    table.get_or_create("T", 0).append(0, [500, 600], [90, 90], [7, 7])  # the prepared file
    assert _open_descriptors() - before == 3
    table.close()
    assert _open_descriptors() == before

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


def test_past_the_mapping_budget_prepared_queue_files_are_only_made(tmp_path, monkeypatch):
    monkeypatch.setattr("skiff.store.consume_queue.mapping_budget", lambda: 2)
    directory = str(tmp_path / "consumequeue")
    before = _open_descriptors()
    table = ConsumeQueueTable(directory, CQ_ENTRY_BYTES * ENTRIES_PER_FILE)
    assert table.prepare("T", 5) == 5
    assert _open_descriptors() - before == 2
    assert sorted(q for _, q in table.queues) == [0, 1]
    assert all(os.path.getsize(os.path.join(directory, "T", str(q), "0" * 20)) == CQ_ENTRY_BYTES * ENTRIES_PER_FILE
               for q in range(5))
    late = table.get_or_create("T", 4)
    late.append(0, [100], [90], [1])  # maps the made file on its first message
    assert (late.entry(0), _open_descriptors() - before) == ((100, 90, 1), 3)
    table.close()
    assert _open_descriptors() == before


def test_the_mapping_budget_leaves_room_below_the_open_file_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_HEADROOM + 500, hard))
    try:
        assert mapping_budget() == 500  # vm.max_map_count is 65,530 or more here
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_HEADROOM // 2, hard))
        assert mapping_budget() == 0
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_flush_of_least_pages_fsyncs_the_busy_queues_and_names_the_first_record_it_left(tmp_path):
    table = ConsumeQueueTable(str(tmp_path / "consumequeue"), CQ_ENTRY_BYTES * 1000)
    busy, sparse = table.get_or_create("T", 0), table.get_or_create("T", 1)
    busy.append(0, list(range(0, 50_000, 100)), [90] * 500, [0] * 500)  # 10,000 bytes: two page boundaries
    sparse.append(0, [70_000, 70_100], [90, 90], [0, 0])
    assert table.flush(least_pages=2) == 70_000
    assert (busy.unflushed, sparse.unflushed, table.flush_count) == (False, True, 1)
    busy.append(500, [80_000], [90], [0])
    assert table.flush(least_pages=2) == 70_000  # busy's one new entry waits too now
    assert table.flush() is None
    assert not busy.unflushed and not sparse.unflushed
    table.close()
