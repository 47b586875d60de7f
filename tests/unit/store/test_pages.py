"""Pages populated ahead of the writer, range flushes that leave them (and the tail) out, and
flushed pages dropped behind the writer."""

import ctypes
import ctypes.util
import resource

import pytest

from skiff.common.record import read_head, read_tail
from skiff.store import pages
from skiff.store.commitlog import DROP_CHUNK_BYTES, CommitLog
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


def test_warmed_pages_take_no_fault_when_written(commitlog):
    populated = 0
    while (step := commitlog.warm(ahead_bytes=256 << 10)) > 0:
        populated += step
    if not populated:
        pytest.skip("madvise(MADV_POPULATE_WRITE) is not supported by this kernel")
    assert populated == 256 << 10
    f = commitlog.files.find(0)

    def faults_writing(lo: int, hi: int) -> int:
        before = _faults()
        for pos in range(lo, hi, PAGE_BYTES):
            f.mm[pos] = 0
        return _faults() - before

    pages = (256 << 10) // PAGE_BYTES
    # A fault or two of the interpreter's own (its heap) may land in the window on a busy machine;
    # the warmed pages themselves take none, where the same writes past the window fault on most pages.
    assert faults_writing(0, 256 << 10) <= 2
    assert faults_writing(512 << 10, 768 << 10) >= pages // 2
    assert commitlog.warm(ahead_bytes=256 << 10) == 0  # nothing new until the writer moves on


def test_warming_follows_the_write_position_and_stops_at_the_file_end(commitlog):
    while commitlog.warm(ahead_bytes=64 << 10):
        pass
    _append(commitlog, 400)
    assert commitlog.write_pos > 64 << 10  # past the warmed window
    fresh = 0
    while (step := commitlog.warm(ahead_bytes=FILE)) > 0:
        fresh += step
    if not fresh:
        pytest.skip("madvise(MADV_POPULATE_WRITE) is not supported by this kernel")
    assert fresh == FILE - commitlog.write_pos


def test_periodic_flush_keeps_the_tail_page_while_whole_pages_are_due(commitlog):
    _append(commitlog, 100)  # 3 pages and a part
    end = commitlog.write_pos
    assert end % PAGE_BYTES
    assert commitlog.flush(keep_tail=True) == end - end % PAGE_BYTES
    assert commitlog.flush(keep_tail=True) == end  # no whole page due: everything goes
    _append(commitlog, 2)
    assert commitlog.flush() == commitlog.write_pos
    assert commitlog.fsync_count == 3


def test_a_closed_file_is_neither_synced_nor_populated(commitlog):
    f = commitlog.files.find(0)
    assert f.sync(0, PAGE_BYTES) and f.sync()
    f.close()
    assert not f.sync(0, PAGE_BYTES) and not f.populate(0, PAGE_BYTES)


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
