"""Appends written through the file descriptor, range flushes that leave the tail page out,
and flushed pages dropped behind the writer."""

import ctypes
import ctypes.util
import resource

import pytest

from skiff.common.record import read_head, read_tail
from skiff.store import pages
from skiff.store.commitlog import DROP_CHUNK_BYTES, CommitLog
from skiff.store.config import CQ_ENTRY_BYTES
from skiff.store.consume_queue import SYNCFS_MIN_QUEUES, ConsumeQueueTable
from skiff.store.pages import PAGE_BYTES

from .conftest import STORE_HOST, message

FILE = 1 << 20


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


@pytest.fixture
def commitlog(tmp_path):
    log = CommitLog(str(tmp_path / "commitlog"), FILE, STORE_HOST)
    log.load()
    log.files.get_or_create(0)
    yield log
    log.close()


def _append(log: CommitLog, count: int, body_bytes: int = 100) -> None:
    msgs = [message(i, body=bytes(body_bytes)) for i in range(count)]
    size = 92 + body_bytes + len(msgs[0].properties)
    log.append(msgs, b"T", range(count), [size] * count, size * count, 1_000)


def test_appends_are_written_through_the_file_and_fault_no_page_in(commitlog):
    """The appending thread finds fresh pages inside pwrite (the GIL released), not by
    faulting them in through the mapping; the records read back through the mapping."""
    msgs = [message(i, body=bytes(100)) for i in range(1000)]
    size = 92 + 100 + len(msgs[0].properties)

    def append() -> None:
        commitlog.append(msgs, b"T", range(1000), [size] * 1000, size * 1000, 1_000)
    append()  # the reused pack buffer grows to the batch here
    before = _faults()
    append()  # ~220 KiB: over fifty fresh pages of the file
    # Stores into the mapping would fault on each of them; a few faults of the interpreter's
    # own heap may still land here (0-2 seen in 15 runs).
    assert _faults() - before <= 8
    assert commitlog.write_pos == 2000 * size
    view = commitlog.record_view(commitlog.write_pos - size)
    assert view is not None and read_tail(view, 0, read_head(view)).body_length == 100


def test_periodic_flush_keeps_the_tail_page_while_whole_pages_are_due(commitlog):
    _append(commitlog, 100)  # 3 pages and a part
    end = commitlog.write_pos
    assert end % PAGE_BYTES
    assert commitlog.flush(keep_tail=True) == end - end % PAGE_BYTES
    assert commitlog.flush(keep_tail=True) == end  # no whole page due: everything goes
    _append(commitlog, 2)
    assert commitlog.flush() == commitlog.write_pos
    assert commitlog.fsync_count == 3


def test_a_closed_file_is_neither_synced_nor_dropped(commitlog):
    f = commitlog.files.find(0)
    assert f.sync(0, PAGE_BYTES) and f.sync()
    f.close()
    assert not f.sync(0, PAGE_BYTES) and not f.drop(0, PAGE_BYTES)


def test_many_queues_with_new_entries_are_flushed_by_one_syncfs(tmp_path, monkeypatch):
    table = ConsumeQueueTable(str(tmp_path / "consumequeue"), CQ_ENTRY_BYTES * 16)
    syncs: list[int] = []
    real_syncfs = pages.syncfs
    monkeypatch.setattr(pages, "syncfs", lambda fd: syncs.append(fd) or real_syncfs(fd))
    many = SYNCFS_MIN_QUEUES + 6
    for q in range(many):
        table.get_or_create("T", q).append(0, [q * 200], [150], [7])
    table.flush()
    if not syncs:
        pytest.skip("syncfs is not available here")
    assert len(syncs) == 1 and table.flush_count == many
    assert not any(cq.unflushed for cq in table.all())
    assert [table.get("T", q).entry(0) for q in (0, many - 1)] == [(0, 150, 7), ((many - 1) * 200, 150, 7)]
    for q in range(3):  # few queues with new entries: each file is synced on its own
        table.get_or_create("T", q).append(1, [50_000 + q], [150], [7])
    table.flush()
    assert len(syncs) == 1 and table.flush_count == many + 3
    assert not any(cq.unflushed for cq in table.all())
    table.close()


def _resident(f, lo: int, hi: int) -> int:
    """Pages of file bytes [lo, hi) in the page cache (mincore of the mapping)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    count = (hi - lo) // PAGE_BYTES
    vec = (ctypes.c_ubyte * count)()
    assert libc.mincore(ctypes.c_void_p(pages.address_of(f.mm) + lo), ctypes.c_size_t(hi - lo), vec) == 0
    return sum(v & 1 for v in vec)


def test_flush_drops_the_pages_behind_the_window_and_keeps_the_data(tmp_path):
    """With commitLogPageCacheBytes=4 MiB, a flush at 12 MiB drops [0, 8 MiB) from the page
    cache and keeps [8, 12 MiB); every record still reads back (faulted in from the file)."""
    log = CommitLog(str(tmp_path / "commitlog"), 16 << 20, STORE_HOST, cache_bytes=DROP_CHUNK_BYTES)
    log.load()
    body = bytes(range(256)) * 4
    msgs = [message(i, body=body) for i in range(256)]
    size = 92 + len(body) + len(msgs[0].properties)
    ends = []
    while log.write_pos + size * 256 <= 12 << 20:
        ends.append(log.write_pos)
        log.append(msgs, b"T", range(256), [size] * 256, size * 256, 1_000)
    end = log.flush()
    f = log.files.find(0)
    assert end == log.write_pos > 11 << 20
    dropped = end - DROP_CHUNK_BYTES - (end - DROP_CHUNK_BYTES) % DROP_CHUNK_BYTES
    kept = _resident(f, dropped, end - end % PAGE_BYTES)
    if kept == 0:
        pytest.skip("this file system keeps no page cache to measure (mincore reports nothing)")
    assert kept == (end - end % PAGE_BYTES - dropped) // PAGE_BYTES
    assert _resident(f, 0, dropped) <= 2  # a page or two read back by a concurrent reader at most
    for start in ends:
        view = log.record_view(start)
        assert view is not None
        tail = read_tail(view, 0, read_head(view))
        assert bytes(view[tail.body_pos : tail.body_pos + tail.body_length]) == body
    assert _resident(f, 0, dropped) > 0  # the reads faulted pages back in
    log.close()


def test_no_window_keeps_every_page(tmp_path):
    log = CommitLog(str(tmp_path / "commitlog"), 16 << 20, STORE_HOST)
    log.load()
    msgs = [message(i, body=bytes(1024)) for i in range(256)]
    size = 92 + 1024 + len(msgs[0].properties)
    for _ in range(40):
        log.append(msgs, b"T", range(256), [size] * 256, size * 256, 1_000)
    end = log.flush()
    assert _resident(log.files.find(0), 0, end - end % PAGE_BYTES) == end // PAGE_BYTES
    log.close()
