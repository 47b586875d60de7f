"""Flushing: group commit shares fsyncs, async flush catches up, slow fsyncs time out."""

import asyncio
import threading
import time

from skiff.store import PutStatus
from skiff.store.flush import CommitLogFlusher

from .conftest import message


def _wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_sixteen_writers_share_fsyncs(open_store):
    store = open_store(flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    writers, each = 16, 20
    statuses, ends = [], []
    start = threading.Barrier(writers)

    def write(w):
        start.wait()
        for i in range(each):
            r = store.put_message(message(i, queue_id=w))
            statuses.append(r.flushed.result(10))
            ends.append(r.physical_offset + r.wrote_bytes)
            assert store.flushed_offset >= ends[-1]

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert statuses == [PutStatus.PUT_OK] * (writers * each)
    fsyncs = store.stats().fsync_count
    # Typically 4-6 writes per fsync; the bound leaves room for a machine busy elsewhere.
    assert 0 < fsyncs < writers * each * 0.9, fsyncs
    assert store.flushed_offset == store.max_physical_offset == max(ends)


def test_sync_ack_can_be_awaited(open_store):
    store = open_store(flushDiskType="SYNC_FLUSH")

    async def main():
        r = store.put_message(message(1))
        return await asyncio.wrap_future(r.flushed), r

    status, r = asyncio.run(main())
    assert status is PutStatus.PUT_OK
    assert store.flushed_offset >= r.physical_offset + r.wrote_bytes


def test_async_flush_catches_up(open_store):
    store = open_store(flushIntervalCommitLog=10)
    for i in range(20):
        r = store.put_message(message(i))
        assert r.flushed is None
    _wait_for(lambda: store.flushed_offset == store.max_physical_offset)
    assert store.stats().fsync_count >= 1


def test_slow_fsync_times_out_then_recovers():
    gate = threading.Event()
    flushed = [0]

    def flush(keep_tail):
        gate.wait()
        flushed[0] = 100
        return flushed[0]

    flusher = CommitLogFlusher(flush, interval_ms=5, sync=True, timeout_ms=100)
    flusher.start()
    try:
        began = time.monotonic()
        late = flusher.request(50)
        assert late.result(5) is PutStatus.FLUSH_DISK_TIMEOUT
        assert time.monotonic() - began >= 0.09
        cancelled = flusher.request(60)
        cancelled.cancel()
        gate.set()
        assert flusher.request(100).result(5) is PutStatus.PUT_OK
    finally:
        gate.set()
        flusher.stop()


def test_stop_resolves_every_waiter():
    flusher = CommitLogFlusher(lambda keep_tail: 10, interval_ms=5, sync=True, timeout_ms=10_000)
    flusher.start()
    covered = flusher.request(10)
    assert covered.result(5) is PutStatus.PUT_OK
    beyond = flusher.request(20)  # a later group, which no fsync covers
    assert beyond is not covered
    flusher.stop()
    assert beyond.result(1) is PutStatus.FLUSH_DISK_TIMEOUT


def _gated_flusher(timeout_ms=10_000):
    """A flusher whose fsyncs each wait for a ``release`` and cover ``written[0]``, read
    when the fsync starts (as the CommitLog's write position is)."""
    written, started, release = [0], threading.Semaphore(0), threading.Semaphore(0)

    def flush(keep_tail):
        target = written[0]
        started.release()
        assert release.acquire(timeout=10)
        return target

    flusher = CommitLogFlusher(flush, interval_ms=60_000, sync=True, timeout_ms=timeout_ms)
    return flusher, written, started, release


def test_writes_during_an_fsync_share_the_next_one_and_its_future():
    flusher, written, started, release = _gated_flusher()
    flusher.start()
    try:
        written[0] = 10
        first = flusher.request(10)
        assert started.acquire(timeout=5)  # the fsync covering 10 runs, and holds
        later = []
        for end in (20, 30, 40):
            written[0] = end
            later.append(flusher.request(end))
        assert later[0] is later[1] is later[2] and later[0] is not first  # one group: one future
        assert not first.done() and not later[0].done()
        release.release()
        assert first.result(5) is PutStatus.PUT_OK
        assert started.acquire(timeout=5)  # the next fsync started at once, for all three
        assert not later[0].done()
        written[0] = 50
        after = flusher.request(50)  # made during that fsync: the group after
        assert after is not later[0]
        release.release()
        assert later[0].result(5) is PutStatus.PUT_OK
        assert started.acquire(timeout=5)
        release.release()
        assert after.result(5) is PutStatus.PUT_OK
        assert flusher.groups == 3
    finally:
        for _ in range(4):
            release.release()
        flusher.stop()


def test_a_group_opened_before_the_fsync_reads_the_position_is_closed_once_covered():
    """A write made after the flusher closed the open group but before its fsync read the
    write position opens a group that fsync covers and resolves: a later write must not
    join that resolved group (it would be answered before its own fsync)."""
    written, started, read = [0], threading.Semaphore(0), threading.Semaphore(0)

    def flush(keep_tail):
        started.release()
        assert read.acquire(timeout=10)  # the write position is read only now
        return written[0]

    flusher = CommitLogFlusher(flush, interval_ms=60_000, sync=True, timeout_ms=10_000)
    flusher.start()
    try:
        written[0] = 10
        first = flusher.request(10)
        assert started.acquire(timeout=5)  # the group of 10 is closed; the position not read yet
        written[0] = 20
        opened = flusher.request(20)
        read.release()  # the fsync covers 20
        assert first.result(5) is PutStatus.PUT_OK and opened.result(5) is PutStatus.PUT_OK
        written[0] = 30
        later = flusher.request(30)
        assert later is not opened
        assert not later.done()  # until an fsync covers 30
        assert started.acquire(timeout=5)
        read.release()
        assert later.result(5) is PutStatus.PUT_OK
    finally:
        for _ in range(4):
            read.release()
        flusher.stop()


def test_a_waiter_cancelling_the_shared_future_leaves_the_others_their_answer():
    flusher, written, started, release = _gated_flusher()
    flusher.start()

    async def wait(future):
        return await asyncio.wrap_future(future)

    async def main():
        written[0] = 10
        future = flusher.request(10)
        gone = asyncio.ensure_future(wait(future))
        kept = asyncio.ensure_future(wait(future))
        await asyncio.sleep(0)
        gone.cancel()  # wrap_future tries to cancel the future it wraps
        await asyncio.wait([gone])
        assert await asyncio.get_running_loop().run_in_executor(None, started.acquire, True, 5)
        release.release()
        return await asyncio.wait_for(kept, 5), future.cancelled()

    try:
        assert asyncio.run(main()) == (PutStatus.PUT_OK, False)
    finally:
        release.release()
        flusher.stop()


def test_a_group_stops_taking_writes_at_half_its_timeout():
    flusher, written, started, release = _gated_flusher(timeout_ms=400)
    flusher.start()
    try:
        hung = flusher.request(10)
        assert started.acquire(timeout=5)  # this fsync hangs until released
        opened = time.monotonic()
        group = flusher.request(20)
        assert flusher.request(30) is group
        _wait_for(lambda: time.monotonic() - opened > 0.25)
        late = flusher.request(40)  # past half the wait: a group of its own, its own full wait
        assert late is not group
        assert group.result(5) is PutStatus.FLUSH_DISK_TIMEOUT
        assert not late.done() or time.monotonic() - opened >= 0.6
        assert late.result(5) is PutStatus.FLUSH_DISK_TIMEOUT
        assert hung.result(5) is PutStatus.FLUSH_DISK_TIMEOUT
    finally:
        for _ in range(4):
            release.release()
        flusher.stop()


def test_shutdown_while_writers_run(open_store):
    store = open_store(flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    results, errors = [], []
    started = threading.Barrier(5)

    def write(w):
        started.wait()
        try:
            for i in range(10_000):
                r = store.put_message(message(i, queue_id=w))
                results.append((r.status, r.flushed.result(10) if r.flushed else None, r.physical_offset))
                if r.status is not PutStatus.PUT_OK:
                    return
        except Exception as exc:  # noqa: BLE001 - any exception is the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    started.wait()
    _wait_for(lambda: len(results) >= 40)
    store.shutdown()
    for t in threads:
        t.join(30)
    assert errors == []
    assert {s for s, _, _ in results} <= {PutStatus.PUT_OK, PutStatus.SERVICE_NOT_AVAILABLE}
    stored = [phys for s, flushed, phys in results if s is PutStatus.PUT_OK]
    assert all(f is PutStatus.PUT_OK for s, f, _ in results if s is PutStatus.PUT_OK)
    again = open_store(root=store.root, mappedFileSizeCommitLog=1 << 20)
    assert all(again.read_record(phys) is not None for phys in stored)


def test_an_append_lock_busy_too_long_refuses_the_put_and_writes_nothing(open_store):
    """RocketMQ's OS_PAGECACHE_BUSY: an append that cannot get the lock within
    osPageCacheBusyTimeOutMills is refused (the broker answers SYSTEM_BUSY) instead of
    stalling its caller, the broker's event loop."""
    store = open_store(osPageCacheBusyTimeOutMills=50)
    assert store.put_message(message(0)).status is PutStatus.PUT_OK
    held, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:  # what a long catch-up or a topic deletion's checkpoint does
        with store._put_lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        busy = store.put_message(message(1))
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    assert busy.status is PutStatus.OS_PAGE_CACHE_BUSY and "osPageCacheBusyTimeOutMills" in busy.reason
    assert 0.04 <= waited < 5
    assert store.get_max_offset("T", 0) == 1, "the refused put wrote nothing"
    after = store.put_message(message(2))
    assert after.status is PutStatus.PUT_OK and after.queue_offset == 1
