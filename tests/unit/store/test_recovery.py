"""Recovery from clean shutdowns and from crash images (a running store's files copied as they are)."""

import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.common.errors import ConfigError, CorruptionError
from skiff.common.stored_message import decode_record
from skiff.store.checkpoint import Checkpoint, read_checkpoint
from skiff.testing.waits import wait_for

from .conftest import message, records_of

EVER = (0, 2**62)


def _fill(store, count, queues=2, first=0):
    return [
        store.put_message(message(i, queue_id=i % queues, keys=f"k{i}", uniq=f"U{i}"))
        for i in range(first, first + count)
    ]


def _bodies(store, queue_id=0):
    out, nxt = [], 0
    while nxt < store.get_max_offset("T", queue_id):
        res = store.get_messages("T", queue_id, nxt, 32)
        out += [(r.queue_offset, r.body) for r in records_of(res)]
        nxt = res.next_begin_offset
    return out


def test_clean_restart_keeps_everything(open_store):
    store = open_store()
    puts = _fill(store, 50)
    before = _bodies(store, 0), _bodies(store, 1)
    store.shutdown()
    assert not os.path.exists(os.path.join(store.root, "abort"))
    cp = read_checkpoint(os.path.join(store.root, "checkpoint"))
    assert cp.dispatched_offset == cp.commitlog_flushed_offset == store.max_physical_offset
    again = open_store(root=store.root)
    report = open_store.last_report
    assert report.clean_shutdown and report.truncated_from is None and report.records_redispatched == 0
    assert report.checkpoint_offset == report.max_physical_offset == puts[-1].physical_offset + puts[-1].wrote_bytes
    assert (_bodies(again, 0), _bodies(again, 1)) == before
    assert again.put_message(message(99)).queue_offset == 25


def test_crash_image_is_rebuilt_from_the_checkpoint(open_store):
    store = open_store()
    _fill(store, 10)
    store.checkpoint()
    _fill(store, 30, first=10)
    cp = read_checkpoint(os.path.join(store.root, "checkpoint"))
    image = open_store.crash_image(store)
    expect = _bodies(store, 0), _bodies(store, 1)
    again = open_store(root=image)
    report = open_store.last_report
    assert not report.clean_shutdown
    assert report.checkpoint_offset == cp.dispatched_offset > 0
    assert report.records_redispatched == 30 and report.truncated_from is None
    assert (_bodies(again, 0), _bodies(again, 1)) == expect
    assert len(again.query_by_key("T", "k35", 64, *EVER)) == 1
    assert len(again.query_by_key("T", "U3", 64, *EVER)) == 1


def test_deleted_consume_queues_are_rebuilt(open_store):
    store = open_store()
    _fill(store, 40)
    expect = _bodies(store, 0), _bodies(store, 1)
    store.shutdown()
    shutil.rmtree(os.path.join(store.root, "consumequeue"))
    again = open_store(root=store.root)
    assert open_store.last_report.records_redispatched == 40
    assert (_bodies(again, 0), _bodies(again, 1)) == expect


def test_missing_or_damaged_checkpoint_checks_everything(open_store):
    store = open_store()
    _fill(store, 20)
    image = open_store.crash_image(store)
    with open(os.path.join(image, "checkpoint"), "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    again = open_store(root=image)
    report = open_store.last_report
    assert report.checkpoint_offset == 0 and any("checkpoint" in n for n in report.notes)
    assert report.records_redispatched == 20
    assert len(_bodies(again, 0)) == 10


def test_entries_past_a_torn_tail_are_trimmed(open_store):
    store = open_store()
    puts = _fill(store, 12)
    store.checkpoint()
    image = open_store.crash_image(store)
    last = puts[-1]
    path = os.path.join(image, "commitlog", f"{last.physical_offset // 4096 * 4096:020d}")
    os.truncate(path, last.physical_offset % 4096 + 30)
    again = open_store(root=image)
    report = open_store.last_report
    assert report.truncated_from == last.physical_offset and f"offset {last.physical_offset}" in report.truncated_reason
    assert report.consume_queue_entries_trimmed == 1 and report.index_entries_trimmed == 2
    assert any("extended" in n for n in report.notes)
    assert again.get_max_offset("T", 1) == 5 and again.query_by_key("T", "k11", 64, *EVER) == []
    assert again.read_record(last.physical_offset) is None
    redo = again.put_message(message(11, queue_id=1, keys="k11"))
    assert (redo.physical_offset, redo.queue_offset) == (last.physical_offset, 5)
    assert [decode_record(r).body for r in again.query_by_key("T", "k11", 64, *EVER)] == [b"message 11"]


def test_files_whose_creation_was_cut_short(open_store):
    store = open_store()
    _fill(store, 5)
    store.shutdown()
    end = store.max_physical_offset
    open(os.path.join(store.root, "commitlog", f"{4096:020d}"), "wb").close()
    open(os.path.join(store.root, "index", "99991231235959999"), "wb").close()
    open(os.path.join(store.root, "consumequeue", "T", "0", f"{320:020d}"), "wb").close()
    again = open_store(root=store.root)
    report = open_store.last_report
    assert any("empty index file" in n for n in report.notes)
    assert report.max_physical_offset == end and report.commitlog_files_removed == 1
    assert len(_bodies(again, 0)) == 3 and len(again.query_by_key("T", "k4", 64, *EVER)) == 1
    assert all(again.put_message(message(i, queue_id=0)).ok for i in range(40))
    assert len(_bodies(again, 0)) == 43


@given(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62))
def test_checkpoint_codec_round_trip(a, b, written):
    flushed, dispatched = max(a, b), min(a, b)
    assert Checkpoint.decode(Checkpoint(flushed, dispatched, written).encode()) == Checkpoint(flushed, dispatched, written)


def test_checkpoint_round_trip_and_rejects_damage():
    cp = Checkpoint(100, 80, 123)
    raw = cp.encode()
    assert Checkpoint.decode(raw) == cp
    assert Checkpoint.decode(raw[:-1]) is None
    assert Checkpoint.decode(raw[:8] + bytes([raw[8] ^ 0xFF]) + raw[9:]) is None
    assert Checkpoint.decode(Checkpoint(1, 2, 3).encode()) is None  # dispatched past flushed


def test_short_file_in_the_middle_is_corruption(open_store):
    store = open_store()
    _fill(store, 60)
    store.shutdown()
    os.truncate(os.path.join(store.root, "commitlog", f"{0:020d}"), 100)
    with pytest.raises(CorruptionError, match="only the last file may be short"):
        open_store(root=store.root)


def test_a_smaller_file_size_setting_cuts_nothing(open_store):
    store = open_store(mappedFileSizeCommitLog=8192)
    _fill(store, 10)
    store.shutdown()
    with pytest.raises(ConfigError, match="mappedFileSizeCommitLog: 4096"):
        open_store(root=store.root)
    assert os.path.getsize(os.path.join(store.root, "commitlog", f"{0:020d}")) == 8192


def test_index_sizes_must_match_the_files(open_store):
    store = open_store()
    _fill(store, 3)
    store.shutdown()
    with pytest.raises(ConfigError, match="maxHashSlotNum"):
        open_store(root=store.root, maxHashSlotNum=65)


def test_one_process_per_store(open_store):
    store = open_store()
    with pytest.raises(ConfigError, match="in use"):
        open_store(root=store.root)


def test_a_periodic_checkpoint_after_a_partial_page_flush_starts_recovery_at_a_record(open_store):
    """ASYNC_FLUSH leaves the last, partly written page for the next flush, so the flushed
    offset can fall inside a record; the checkpoint must still name a record boundary, or a
    crash image's recovery would start mid-record and cut every record after it."""
    sizes = {"mappedFileSizeCommitLog": 65536, "flushIntervalCommitLog": 600_000}
    store = open_store(**sizes)
    puts = [store.put_message(message(i, body=b"z" * 700)) for i in range(12)]
    store.commitlog.flush(keep_tail=True)
    assert store.flushed_offset % 4096 == 0 and store.flushed_offset not in {p.physical_offset for p in puts}
    store._checkpoint()
    cp = read_checkpoint(os.path.join(store.root, "checkpoint"))
    assert cp.dispatched_offset in {p.physical_offset for p in puts} | {store.max_physical_offset}
    image = open_store.crash_image(store)
    again = open_store(root=image, **sizes)
    assert open_store.last_report.truncated_from is None
    assert again.max_physical_offset == store.max_physical_offset
    assert len(_bodies(again, 0)) == 12


def test_a_crash_leaves_the_index_header_of_the_last_checkpoint_and_recovery_indexes_the_rest(open_store):
    """Appends do not rewrite the IndexFile header (only a flush does): a crash image's header
    counts the entries of the last checkpoint, the entries after it lie past that count, and
    recovery re-links and re-indexes them, so every key is found once."""
    store = open_store()
    _fill(store, 10)
    store.checkpoint()
    _fill(store, 30, first=10)
    image = open_store.crash_image(store)
    (name,) = os.listdir(image / "index")
    with open(image / "index" / name, "rb") as f:
        header_count = int.from_bytes(f.read(40)[36:40], "big")
    assert header_count == 1 + 2 * 10 < store.index.files[-1].index_count == 1 + 2 * 40
    again = open_store(root=image)
    assert open_store.last_report.records_redispatched == 30
    for i in range(40):
        assert [decode_record(r).body for r in again.query_by_key("T", f"k{i}", 64, *EVER)] == [f"message {i}".encode()]
        assert len(again.query_by_key("T", f"U{i}", 64, *EVER)) == 1
    again.put_message(message(40, keys="k40"))
    assert len(again.query_by_key("T", "k40", 64, *EVER)) == 1


def test_prepared_queue_directories_survive_a_restart_and_take_messages(open_store):
    store = open_store()
    assert store.prepare_topic("T", 3) == 3
    assert store.prepare_topic("T", 4) == 1  # only the missing one
    store.put_message(message(0, queue_id=1))
    store.shutdown()
    again = open_store(root=store.root)
    assert [again.get_max_offset("T", q) for q in range(4)] == [0, 1, 0, 0]
    assert [again.put_message(message(i, queue_id=q)).queue_offset for i, q in ((1, 0), (2, 1), (3, 3))] == [0, 1, 0]
    assert [b for _, b in _bodies(again, 1)] == [message(0).body, message(2).body]
    again.delete_topic("T")
    assert not os.path.exists(os.path.join(again.root, "consumequeue", "T"))


def _periodic_checkpoint(store):
    """The checkpoint the store's periodic flush writes once it has flushed every put."""
    path = os.path.join(store.root, "checkpoint")
    return wait_for(lambda: (cp := read_checkpoint(path)) is not None
                    and cp.commitlog_flushed_offset == store.max_physical_offset and cp,
                    what="a periodic checkpoint past the last put")


def test_the_periodic_flush_leaves_sparse_queues_and_the_checkpoint_stays_below_them(open_store):
    store = open_store(flushIntervalConsumeQueue=20, flushConsumeQueueThoroughInterval=600_000)
    puts = _fill(store, 6, queues=3)  # two entries a queue: under flushConsumeQueueLeastPages (2)
    cp = _periodic_checkpoint(store)
    assert cp.dispatched_offset == puts[0].physical_offset == 0  # the first entry left unflushed
    image = open_store.crash_image(store)
    expect = [_bodies(store, q) for q in range(3)]
    again = open_store(root=image)
    assert open_store.last_report.records_redispatched == 6
    assert [_bodies(again, q) for q in range(3)] == expect


def test_the_thorough_flush_flushes_every_queue_and_moves_the_checkpoint_to_the_end(open_store):
    store = open_store(flushIntervalConsumeQueue=20, flushConsumeQueueThoroughInterval=1)
    _fill(store, 6, queues=3)
    path = os.path.join(store.root, "checkpoint")
    wait_for(lambda: (cp := read_checkpoint(path)) is not None and cp.dispatched_offset == store.max_physical_offset,
             what="a periodic checkpoint at the end")  # a least-pages flush would leave it at 0
    assert not any(cq.unflushed for cq in store.queues.all())
