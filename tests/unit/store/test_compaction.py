"""Compaction: latest record per key kept at its queue offset, reads across the cleaned
point, multi-pass with a small map, hash collisions, tombstones, reopening."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import threading

from skiff.common.clock import ManualClock
from skiff.common.hashing import tag_hash
from skiff.common.properties import Prop
from skiff.store import GetStatus, MessageStore
from skiff.store.compaction import OFFSET_MAP_BYTES_PER_ENTRY, OffsetMap

from .conftest import make_config, message, records_of, STORE_HOST

BIG_MAP = 1 << 20
DAY_MS = 86_400_000


def put(store: MessageStore, key: str | None, body: bytes, *, tags: str | None = None, queue_id: int = 0) -> int:
    r = store.put_message(message(0, keys=key, body=body, tags=tags, queue_id=queue_id))
    assert r.ok, r
    return r.queue_offset


def compact(store: MessageStore, map_entries: int = BIG_MAP, retention_ms: int = DAY_MS, queue_id: int = 0):
    store.flush()
    return store.compact("T", queue_id, delete_retention_ms=retention_ms,
                         max_offset_map_size=map_entries * OFFSET_MAP_BYTES_PER_ENTRY)


def view(store: MessageStore, queue_id: int = 0, start: int | None = None, max_count: int = 7) -> list[tuple]:
    """(queue offset, KEYS, body) of every record a consumer reads from ``start`` (the min
    offset), pulling ``max_count`` at a time and following next_begin_offset."""
    offset = store.get_min_offset("T", queue_id) if start is None else start
    out: list[tuple] = []
    for _ in range(10_000):
        g = store.get_messages("T", queue_id, offset, max_count)
        if g.status is not GetStatus.FOUND:
            assert g.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE,
                                GetStatus.NO_MATCHED_LOGIC_QUEUE), g
            return out
        recs = records_of(g)
        assert [r.queue_offset for r in recs] == g.queue_offsets
        out += [(r.queue_offset, r.properties.get(Prop.KEYS), r.body) for r in recs]
        assert g.next_begin_offset > offset
        offset = g.next_begin_offset
    raise AssertionError("the pull loop did not end")


def test_latest_per_key_kept_at_original_offsets(open_store):
    store = open_store()
    for i in range(30):
        put(store, f"k{i % 4}", f"v{i}".encode())
    report = compact(store)
    assert (report.records_read, report.records_kept, report.cleaned_offset) == (30, 4, 30)
    assert report.bytes_reclaimed > 0 and report.bytes_written < report.bytes_read
    assert view(store) == [(26 + j, f"k{(26 + j) % 4}", f"v{26 + j}".encode()) for j in range(4)]
    put(store, "k1", b"after")
    assert view(store)[-2:] == [(29, "k1", b"v29"), (30, "k1", b"after")]
    assert store.get_min_offset("T", 0) == 0 and store.get_max_offset("T", 0) == 31
    st_ = store.compaction_status("T", 0)
    assert (st_.cleaned_offset, st_.segment_records, st_.runs, st_.max_offset) == (30, 4, 1, 31)
    assert 0 < st_.dirty_ratio < 1 and st_.bytes_reclaimed == report.bytes_reclaimed


def test_pull_inside_a_gap_moves_forward_and_filters_work(open_store):
    store = open_store()
    for i in range(12):
        put(store, f"k{i % 3}", f"v{i}".encode(), tags="even" if i % 2 == 0 else "odd")
    compact(store)
    g = store.get_messages("T", 0, 1, 32)  # offset 1 was removed: the answer starts at 9
    assert g.status is GetStatus.FOUND and g.queue_offsets == [9, 10, 11] and g.next_begin_offset == 12
    even = store.get_messages("T", 0, 0, 32, tag_codes=frozenset({tag_hash("even")}))
    assert even.queue_offsets == [10] and even.next_begin_offset == 12
    by_body = store.get_messages("T", 0, 0, 32, record_filter=lambda v: b"v11" in bytes(v))
    assert by_body.queue_offsets == [11]
    one = store.get_messages("T", 0, 0, 2)
    assert one.queue_offsets == [9, 10] and one.next_begin_offset == 11
    assert store.get_offset_by_time("T", 0, 0) == 0
    assert store.get_earliest_store_time("T", 0) >= 0


def test_multi_pass_with_a_tiny_map(open_store):
    store = open_store()
    for i in range(40):
        put(store, f"k{i % 9}", f"v{i}".encode())
    report = compact(store, map_entries=3)
    assert report.passes >= 3
    assert view(store) == [(i, f"k{i % 9}", f"v{i}".encode()) for i in range(31, 40)]


def test_colliding_hashes_never_lose_a_key(open_store):
    store = open_store()
    store.compaction.key_hash = lambda key: 7  # every key collides
    for i in range(20):
        put(store, f"k{i % 5}", f"v{i}".encode())
    compact(store)
    seen = view(store)
    latest = {f"k{i % 5}": (i, f"k{i % 5}", f"v{i}".encode()) for i in range(20)}
    assert set(latest.values()) <= set(seen)
    assert [r for r in seen if r[1] == "k4"] == [latest["k4"]]  # the key of the map's entry was cleaned


def test_tombstones_expire_after_delete_retention(open_store):
    clock = ManualClock()
    store = open_store(clock)
    put(store, "a", b"1")
    put(store, "b", b"2")
    put(store, "a", b"")
    compact(store, retention_ms=1000)
    assert view(store) == [(1, "b", b"2"), (2, "a", b"")]
    clock.advance(1000)
    compact(store, retention_ms=1000)  # no new dirty records: nothing to do yet
    put(store, "c", b"3")
    compact(store, retention_ms=1000)
    assert view(store) == [(1, "b", b"2"), (3, "c", b"3")]


def test_unflushed_tail_and_messages_without_keys_are_kept(open_store):
    store = open_store()
    put(store, None, b"no key")
    put(store, "a", b"1")
    put(store, "a", b"2")
    compact(store)
    assert view(store) == [(0, None, b"no key"), (2, "a", b"2")]


def test_compacted_state_survives_reopen_and_frees_consume_queue_files(open_store, tmp_path):
    store = open_store()
    for i in range(60):  # 16 entries per ConsumeQueue file: four files
        put(store, f"k{i % 2}", f"v{i}".encode())
    compact(store)
    assert [f.start for f in store.queues.get("T", 0).files.files] == [60 * 20 // 320 * 320]
    before = view(store)
    store.shutdown()
    again = open_store()
    assert view(again) == before == [(58, "k0", b"v58"), (59, "k1", b"v59")]
    for i in range(3):
        put(again, "k0", f"w{i}".encode())
    compact(again)
    assert view(again) == [(59, "k1", b"v59"), (62, "k0", b"w2")]
    assert sorted(p.name for p in (tmp_path / "store" / "compaction" / "T" / "0").iterdir()) == [
        "00000000000000000002.data", "00000000000000000002.index", "MANIFEST"]


def test_delete_topic_drops_compacted_files(open_store, tmp_path):
    store = open_store()
    put(store, "a", b"1")
    compact(store)
    store.delete_topic("T")
    assert not (tmp_path / "store" / "compaction" / "T").exists()
    assert store.get_messages("T", 0, 0, 32).status is GetStatus.NO_MATCHED_LOGIC_QUEUE


def test_offset_map_keeps_the_latest_offset_per_hash():
    m = OffsetMap(4)
    m.add([5, 3, 5], [0, 1, 2])
    m.add([3], [7])
    assert m.room == 2
    assert m.lookup([5, 3, 9]).tolist() == [2, 7, -1]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 7), st.binary(min_size=1, max_size=12)),
        st.tuples(st.just("tombstone"), st.integers(0, 7), st.just(b"")),
        st.tuples(st.just("compact"), st.integers(1, 12), st.just(b"")),
        st.tuples(st.just("reopen"), st.just(0), st.just(b"")),
    ),
    min_size=1, max_size=60,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_consumer_view_matches_latest_per_key_model(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("prop")
    clock = ManualClock()
    store = MessageStore(make_config(root), store_host=STORE_HOST, clock=clock)
    store.start()
    try:
        log: dict[int, tuple] = {}
        for op, n, body in ops:
            if op == "reopen":
                before = view(store)
                store.shutdown()
                store = MessageStore(make_config(root), store_host=STORE_HOST, clock=clock)
                store.start()
                assert view(store) == before
            elif op == "compact":
                compact(store, map_entries=n)
                seen = view(store)
                assert all(log[o] == (o, k, b) for o, k, b in seen)  # offsets and bytes preserved
                assert [r[0] for r in seen] == sorted(r[0] for r in seen)
                assert _latest(log, drop_tombstones=False) <= set(seen)
            else:
                offset = put(store, f"key{n}", body)
                log[offset] = (offset, f"key{n}", body)
        store.clock.advance(2 * DAY_MS)
        compact(store)
        assert view(store, max_count=3) == sorted(_latest(log, drop_tombstones=True))
    finally:
        store.shutdown()


def _latest(log: dict[int, tuple], *, drop_tombstones: bool) -> set[tuple]:
    latest: dict[str, tuple] = {}
    for offset in sorted(log):
        latest[log[offset][1]] = log[offset]
    return {r for r in latest.values() if r[2] or not drop_tombstones}


def test_a_lost_checkpoint_after_compaction_rebuilds_from_the_commitlog(open_store, tmp_path):
    store = open_store()
    for i in range(60):
        put(store, f"k{i % 2}", f"v{i}".encode())
    compact(store)
    store.shutdown()
    (tmp_path / "store" / "checkpoint").unlink()  # recovery checks the whole CommitLog again
    again = open_store()
    assert open_store.last_report.records_redispatched == 60
    assert view(again) == [(58, "k0", b"v58"), (59, "k1", b"v59")]
    put(again, "k0", b"after")
    assert view(again)[-1] == (60, "k0", b"after")


def test_retention_keeps_dirty_records_of_compacted_queues_until_compacted(open_store):
    clock = ManualClock()
    store = open_store(clock, fileReservedTime=1)
    for i in range(4):
        put(store, f"k{i}", b"x" * 300)
    compact(store)  # queue T:0 now has a segment; everything after is dirty
    for i in range(30):  # ~392 B each: several 4 KiB CommitLog files
        put(store, f"k{i % 4}", b"y" * 300)
    put(store, None, b"z" * 300, queue_id=1)
    clock.advance(2 * 3_600_000)
    put(store, None, b"new", queue_id=1)  # a record in a newer file, two hours later
    store.flush()
    status = store.compaction_status("T", 0)
    assert status.holds_retention and status.cleaned_offset == 4
    assert store.run_retention(manual=True).commitlog_files_deleted == 0  # pinned by T:0's dirty records
    store.compaction.retained_topics = frozenset({"Other"})  # T is no longer compacted: nothing pinned
    assert store.compaction.pinned_offset() is None
    store.compaction.retained_topics = None
    compact(store)
    assert not store.compaction_status("T", 0).holds_retention
    assert store.run_retention(manual=True).commitlog_files_deleted > 0
    assert view(store) == [(30 + j, f"k{(30 + j) % 4}", b"y" * 300) for j in range(4)]


def test_appends_and_reads_go_on_while_a_compaction_is_under_way(open_store):
    store = open_store()
    for i in range(40):
        put(store, f"k{i % 4}", f"v{i}".encode())
    paused, resume = threading.Event(), threading.Event()

    def step(name: str) -> None:
        if name == "index-synced":  # the new generation is written, the switch not yet made
            paused.set()
            assert resume.wait(30)

    store.flush()
    worker = threading.Thread(target=store.compact, args=("T", 0),
                              kwargs={"delete_retention_ms": DAY_MS, "max_offset_map_size": BIG_MAP, "step": step})
    worker.start()
    try:
        assert paused.wait(30)
        for i in range(40, 45):
            put(store, f"k{i % 4}", f"v{i}".encode())  # the put lock is free: appends are not blocked
        assert len(view(store)) == 45  # the old state is still what readers see
    finally:
        resume.set()
        worker.join(30)
    assert view(store) == [(36 + j, f"k{j}", f"v{36 + j}".encode()) for j in range(4)] + [
        (40 + j, f"k{j % 4}", f"v{40 + j}".encode()) for j in range(5)]
