"""Retention with an injected clock: expiry, deleteWhen, forced cleaning, disk-full refusal."""

import os
import time

from skiff.common.clock import ManualClock
from skiff.store import GetStatus, PutStatus

from .conftest import message, records_of

HOUR_MS = 3_600_000
FILE = 4096


def _old_then_new(store, clock, old=40, new=5):
    """``old`` messages now, then ``new`` more two hours later (each 392 bytes: ~10 a file)."""
    for i in range(old):
        store.put_message(message(i, body=b"o" * 300, keys=f"k{i}"))
    clock.advance(2 * HOUR_MS)
    for i in range(old, old + new):
        store.put_message(message(i, body=b"n" * 300, keys=f"k{i}"))
    store.flush()


def _local_hour(clock):
    return time.localtime(clock.now_ms() / 1000).tm_hour


def test_expired_files_go_and_queues_move_forward(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=1, maxIndexNum=16, deleteWhen=str((_local_hour(clock) + 12) % 24))
    _old_then_new(store, clock)
    files_before = store.stats().commitlog_files
    index_before = store.stats().index_files
    cq_files_before = len(store.queues.get("T", 0).files.files)
    assert store.run_retention().commitlog_files_deleted == 0  # not the deleteWhen hour
    report = store.run_retention(manual=True)
    assert report.commitlog_files_deleted == files_before - 2  # the one written last in the old hour stays
    assert store.min_physical_offset == report.min_physical_offset == (files_before - 2) * FILE
    assert report.consume_queue_files_deleted >= 1 and report.index_files_deleted >= 1
    assert len(store.queues.get("T", 0).files.files) == cq_files_before - report.consume_queue_files_deleted
    assert store.stats().index_files == index_before - report.index_files_deleted
    low = store.get_min_offset("T", 0)
    first = store.get_messages("T", 0, low, 1)
    assert records_of(first)[0].commit_log_offset >= store.min_physical_offset
    assert store.read_record(records_of(first)[0].commit_log_offset - 1) is None
    too_small = store.get_messages("T", 0, 0, 32)
    assert (too_small.status, too_small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, low)
    assert store.read_record(0) is None
    assert [m.body[:1] for m in records_of(store.get_messages("T", 0, 40, 32))] == [b"n"] * 5
    assert store.query_by_key("T", "k0", 64, 0, 2**62) == []
    assert len(store.query_by_key("T", "k44", 64, 0, 2**62)) == 1
    assert store.run_retention(manual=True).commitlog_files_deleted == 0


def test_delete_when_hour_triggers_a_pass(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=1, deleteWhen=f"{(_local_hour(clock) + 2) % 24:02d}")
    _old_then_new(store, clock)
    assert store.run_retention().commitlog_files_deleted > 0


def test_unflushed_records_are_kept(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=1, flushIntervalCommitLog=600_000)
    for i in range(40):
        store.put_message(message(i, body=b"o" * 300))
    clock.advance(2 * HOUR_MS)
    store.put_message(message(99, body=b"n" * 300))
    assert store.flushed_offset < store.max_physical_offset
    assert store.run_retention(manual=True).commitlog_files_deleted == 0
    store.flush()
    assert store.run_retention(manual=True).commitlog_files_deleted > 0


def test_full_disk_cleans_unexpired_files_but_keeps_the_last(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=72, diskSpaceCleanForciblyRatio=0)
    for i in range(40):
        store.put_message(message(i, body=b"o" * 300))
    store.flush()
    files = store.stats().commitlog_files
    report = store.run_retention()
    assert report.forced and report.commitlog_files_deleted == files - 1
    assert store.stats().commitlog_files == 1
    assert store.put_message(message(100)).ok


def test_disk_above_warning_refuses_writes_but_serves_reads(open_store):
    store = open_store()
    for i in range(5):
        store.put_message(message(i))
    store.shutdown()
    full = open_store(root=store.root, diskSpaceWarningLevelRatio=0)
    r = full.put_message(message(9))
    assert r.status is PutStatus.DISK_FULL and "diskSpaceWarningLevelRatio" in r.reason
    assert not full.stats().writable
    assert [m.body for m in records_of(full.get_messages("T", 0, 0, 32))] == [f"message {i}".encode() for i in range(5)]
    assert os.path.exists(full.root)


def test_slices_held_across_deletion_stay_valid(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=1)
    _old_then_new(store, clock)
    held = store.get_messages("T", 0, 0, 4)
    before = [bytes(b) for b in held.buffers]
    assert store.run_retention(manual=True).commitlog_files_deleted > 0
    assert [bytes(b) for b in held.buffers] == before  # the mapping outlives its file
    assert store.get_messages("T", 0, 0, 4).status is GetStatus.OFFSET_TOO_SMALL
    del held
