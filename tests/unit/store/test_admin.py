"""Topics, dispatch listeners, replicated appends and stats."""

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.store import GetStatus, PutStatus

from .conftest import message, records_of


def test_topics_and_deletion(open_store):
    store = open_store()
    for q in (0, 1, 3):
        store.put_message(message(q, topic="A", queue_id=q))
    store.put_message(message(9, topic="B"))
    assert store.topics() == ["A", "B"] and store.queue_ids("A") == [0, 1, 3]
    store.delete_topic("A")
    assert store.topics() == ["B"] and store.queue_ids("A") == []
    assert store.get_messages("A", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    again = store.put_message(message(10, topic="A", queue_id=1))
    assert again.queue_offset == 0
    store.shutdown()
    reopened = open_store(root=store.root)
    assert reopened.topics() == ["A", "B"] and reopened.queue_ids("A") == [1]
    assert [m.body for m in records_of(reopened.get_messages("A", 1, 0, 32))] == [b"message 10"]


def test_listeners_hear_each_dispatch(open_store):
    store = open_store()
    heard = []
    store.add_dispatch_listener(heard.append)
    store.add_dispatch_listener(lambda touched: 1 / 0)  # a failing listener harms nobody
    store.put_message(message(1, queue_id=2))
    store.put_messages([message(i, queue_id=0) for i in range(3)])
    assert heard == [[("T", 2, 1)], [("T", 0, 3)]]


def _replicate(master, slave):
    data = b"".join(bytes(v) for v in master.commitlog.views(slave.max_physical_offset, master.max_physical_offset))
    return slave.append_replicated(data, slave.max_physical_offset)


def test_replicated_appends_match_the_master(open_store, tmp_path):
    master = open_store()
    slave = open_store(root=tmp_path / "slave")
    heard = []
    slave.add_dispatch_listener(heard.extend)
    for n in range(8):
        master.put_messages([message(n * 10 + i, queue_id=n % 3, body=b"r" * 200, keys=f"k{n}") for i in range(4)])
        assert _replicate(master, slave) == master.max_physical_offset
    for q in range(3):
        got = slave.get_messages("T", q, 0, 32)
        assert [bytes(b) for b in got.buffers] == [bytes(b) for b in master.get_messages("T", q, 0, 32).buffers]
    assert ("T", 1, 12) in heard
    assert len(slave.query_by_key("T", "k5", 64, 0, 2**62)) == 4
    slave.shutdown()
    again = open_store(root=tmp_path / "slave")
    assert again.get_max_offset("T", 0) == master.get_max_offset("T", 0)


def test_bad_replicated_data_writes_nothing(open_store, tmp_path):
    master = open_store()
    slave = open_store(root=tmp_path / "slave")
    r = master.put_messages([message(i) for i in range(3)])
    data = bytearray(b"".join(bytes(v) for v in master.commitlog.views(0, master.max_physical_offset)))
    with pytest.raises(ValueError, match="ends at 0"):
        slave.append_replicated(bytes(data), 5)
    with pytest.raises(DecodeError):
        slave.append_replicated(bytes(data[:-3]), 0)
    data[r.wrote_bytes - 5] ^= 0xFF
    with pytest.raises(DecodeError, match="CRC"):
        slave.append_replicated(bytes(data), 0)
    assert slave.max_physical_offset == 0 and slave.get_max_offset("T", 0) == 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(1, 900), min_size=1, max_size=30))
def test_cut_replicated_data_appends_whole_records_and_holds_the_rest(open_store, tmp_path_factory, cuts):
    """However the stream cuts records (and the blanks at file ends), only whole ones are
    appended, and the slave ends byte-identical with the same queues and keys."""
    master = open_store(root=tmp_path_factory.mktemp("master"))
    for n in range(6):
        master.put_messages([message(n * 10 + i, queue_id=n % 2, body=b"c" * (150 + 97 * i), keys=f"k{n} x{i}",
                                     tags="t1" if i % 2 else "t2", uniq=f"U{n}-{i}") for i in range(4)])
    data = b"".join(bytes(v) for v in master.commitlog.views(0, master.max_physical_offset))
    slave = open_store(root=tmp_path_factory.mktemp("slave"))
    held, start, pos = bytearray(), 0, 0
    for cut in itertools.cycle(cuts):
        if pos >= len(data):
            break
        held += data[pos : pos + cut]
        pos += cut
        end = slave.append_replicated(held, start, hold_partial=True)
        assert data[start:end] == bytes(held[: end - start])
        del held[: end - start]
        start = end
    assert start == master.max_physical_offset and not held
    assert _commitlog(slave) == data
    for q in (0, 1):
        assert [bytes(b) for b in slave.get_messages("T", q, 0, 64).buffers] == \
            [bytes(b) for b in master.get_messages("T", q, 0, 64).buffers]
    assert len(slave.query_by_key("T", "x3", 64, 0, 2**62)) == 6
    assert len(slave.query_by_key("T", "U4-2", 64, 0, 2**62)) == 1


def _commitlog(store):
    return b"".join(bytes(v) for v in store.commitlog.views(0, store.max_physical_offset))


def test_stats_count_what_happened(open_store):
    store = open_store(flushDiskType="SYNC_FLUSH")
    for i in range(3):
        store.put_message(message(i)).flushed.result(5)
    store.put_message(message(0, topic="bad topic"))
    stats = store.stats()
    assert (stats.put_messages, stats.put_failures) == (3, 1)
    assert stats.put_bytes == stats.max_physical_offset == stats.flushed_offset == stats.dispatched_offset
    assert stats.fsync_count >= 1 and stats.commitlog_files == 1 and stats.consume_queues == 1
    assert stats.writable and 0 < stats.disk_used_percent <= 100


def test_an_empty_replica_starts_at_its_masters_last_file(open_store, tmp_path):
    master = open_store()
    while master.max_physical_offset < 3 * 4096:
        master.put_messages([message(i, queue_id=1, body=b"x" * 300) for i in range(3)])
    last_file = master.max_physical_offset - master.max_physical_offset % 4096
    slave = open_store(root=tmp_path / "slave")
    with pytest.raises(ValueError, match="ends at 0"):
        slave.append_replicated(b"", last_file + 8)  # not a file start
    data = b"".join(bytes(v) for v in master.commitlog.views(last_file, master.max_physical_offset))
    assert slave.append_replicated(data, last_file) == master.max_physical_offset
    assert slave.min_physical_offset == last_file
    first = slave.get_min_offset("T", 1)
    assert first > 0 and slave.get_max_offset("T", 1) == master.get_max_offset("T", 1)
    got = slave.get_messages("T", 1, first, 64)
    assert [bytes(b) for b in got.buffers] == [bytes(b) for b in master.get_messages("T", 1, first, 64).buffers]
    slave.shutdown()
    assert open_store(root=tmp_path / "slave").min_physical_offset == last_file


def test_a_replica_refuses_puts(open_store):
    store = open_store()
    store.replica = True
    r = store.put_message(message(1))
    assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and "slave" in r.reason
    assert store.max_physical_offset == 0


def test_truncate_drops_the_tail_durably_with_its_entries(open_store):
    store = open_store()
    kept = [store.put_messages([message(i, queue_id=i % 2, keys=f"k{i}")]) for i in range(6)]
    cut = kept[4].physical_offset
    for i in range(6, 9):
        store.put_message(message(i, queue_id=i % 2, keys=f"k{i}"))
    with pytest.raises(ValueError, match="no record starts"):
        store.truncate(cut + 1)
    assert store.truncate(cut) > 0
    assert store.max_physical_offset == cut
    assert (store.get_max_offset("T", 0), store.get_max_offset("T", 1)) == (2, 2)
    assert store.query_by_key("T", "k7", 8, 0, 2**62) == [] and store.query_by_key("T", "k3", 8, 0, 2**62)
    again = store.put_message(message(20, queue_id=0))
    assert again.physical_offset == cut and again.queue_offset == 2
    root = store.root
    store.shutdown()
    reopened = open_store(root=root)
    assert [m.body for m in records_of(reopened.get_messages("T", 0, 0, 32))] == [
        b"message 0", b"message 2", b"message 20"]
