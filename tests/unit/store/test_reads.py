"""ConsumeQueue format and pulls: statuses, filters, limits, coalesced slices, time search."""

import tempfile

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common.clock import ManualClock
from skiff.common.hashing import tag_hash
from skiff.common.properties import decode_properties
from skiff.common.record import read_head, read_tail
from skiff.store import GetStatus, MessageStore
from skiff.store.consume_queue import ENTRY, ENTRY_DTYPE

from .conftest import STORE_HOST, make_config, message, records_of

PER_FILE = 16  # ConsumeQueue entries per file in the small config


@given(st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(1, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=50))
def test_entry_format_round_trip(entries):
    raw = b"".join(ENTRY.pack(*e) for e in entries)
    assert [ENTRY.unpack_from(raw, 20 * i) for i in range(len(entries))] == entries
    arr = np.frombuffer(raw, ENTRY_DTYPE)
    assert list(zip(arr["offset"].tolist(), arr["size"].tolist(), arr["tag"].tolist())) == entries


def test_consume_queue_files_roll_over(open_store):
    store = open_store()
    for i in range(40):
        assert store.put_message(message(i)).ok
    cq = store.queues.get("T", 0)
    assert [f.start for f in cq.files.files] == [0, 320, 640]
    first = store.get_messages("T", 0, 0, 32)
    assert first.message_count == PER_FILE and first.next_begin_offset == PER_FILE
    second = store.get_messages("T", 0, 10, 32)
    assert [r.queue_offset for r in records_of(second)] == list(range(10, 16))
    tail = store.get_messages("T", 0, 32, 32)
    assert [r.body for r in records_of(tail)] == [f"message {i}".encode() for i in range(32, 40)]
    assert tail.next_begin_offset == 40 and (tail.min_offset, tail.max_offset) == (0, 40)


def test_status_for_every_position(open_store):
    store = open_store()
    for i in range(20):
        store.put_message(message(i))
    unknown = store.get_messages("Nope", 0, 0, 32)
    assert (unknown.status, unknown.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
    store.queues.get_or_create("T", 5)
    empty = store.get_messages("T", 5, 3, 32)
    assert (empty.status, empty.next_begin_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0)
    one = store.get_messages("T", 0, 20, 32)
    assert (one.status, one.next_begin_offset, one.buffers) == (GetStatus.OFFSET_OVERFLOW_ONE, 20, [])
    badly = store.get_messages("T", 0, 99, 32)
    assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 20)
    found = store.get_messages("T", 0, 3, 2)
    assert (found.status, found.next_begin_offset, found.message_count) == (GetStatus.FOUND, 5, 2)
    assert found.queue_offsets == [3, 4]


def test_status_when_files_are_gone(open_store):
    store = open_store()
    for i in range(40):
        store.put_message(message(i, body=b"x" * 300))
    store.commitlog.files.remove_head(1)  # as retention would, before queues catch up
    removing = store.get_messages("T", 0, 0, 4)
    assert removing.status is GetStatus.MESSAGE_WAS_REMOVING
    assert removing.next_begin_offset == 4
    store.queues.get("T", 0).files.remove_head(1)
    null = store.get_messages("T", 0, 3, 4)
    assert (null.status, null.next_begin_offset) == (GetStatus.OFFSET_FOUND_NULL, PER_FILE)


def test_tag_codes_filter_on_the_queue(open_store):
    store = open_store()
    tags = ["A", "B", "C"]
    for i in range(15):
        store.put_message(message(i, tags=tags[i % 3]))
    b = store.get_messages("T", 0, 0, 32, tag_codes=frozenset({tag_hash("B")}))
    assert [r.tags for r in records_of(b)] == ["B"] * 5
    assert b.queue_offsets == [1, 4, 7, 10, 13] and b.next_begin_offset == 15
    assert len(b.buffers) == 5  # matching records are not adjacent
    two = store.get_messages("T", 0, 0, 2, tag_codes=frozenset({tag_hash("A"), tag_hash("C")}))
    assert two.queue_offsets == [0, 2] and two.next_begin_offset == 3
    none = store.get_messages("T", 0, 0, 32, tag_codes=frozenset({tag_hash("Z")}))
    assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 15)


def test_filter_scan_is_bounded(open_store):
    store = open_store(maxFilterMessageCount=4, mappedFileSizeConsumeQueue=20 * 64)
    for i in range(20):
        store.put_message(message(i, tags="A"))
    res = store.get_messages("T", 0, 0, 2, tag_codes=frozenset({tag_hash("B")}))
    assert (res.status, res.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 4)


def test_record_filter_sees_raw_records(open_store):
    store = open_store()
    for i in range(12):
        store.put_message(message(i, extra={"color": "red" if i % 4 == 0 else "blue"}))

    def red(view):
        head = read_head(view)
        return decode_properties(read_tail(view, 0, head).properties_raw).get("color") == "red"

    res = store.get_messages("T", 0, 0, 32, record_filter=red)
    assert res.queue_offsets == [0, 4, 8] and res.next_begin_offset == 12
    capped = store.get_messages("T", 0, 0, 2, record_filter=red)
    assert capped.queue_offsets == [0, 4] and capped.next_begin_offset == 5  # stops where the batch filled
    none = store.get_messages("T", 0, 1, 3, record_filter=lambda v: False)
    assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 12)


def test_slices_are_the_records_coalesced(open_store):
    store = open_store(mappedFileSizeCommitLog=1 << 16)
    alone = [store.put_message(message(i, topic="Alone")).physical_offset for i in range(10)]
    mixed = []
    for i in range(10):
        mixed.append(store.put_message(message(i, topic="Mixed", queue_id=0)).physical_offset)
        store.put_message(message(i, topic="Mixed", queue_id=1))
    res = store.get_messages("Alone", 0, 0, 32)
    assert len(res.buffers) == 1
    assert bytes(res.buffers[0]) == b"".join(store.read_record(p) for p in alone)
    assert res.total_bytes == len(res.buffers[0])
    res = store.get_messages("Mixed", 0, 0, 32)
    assert len(res.buffers) == 10
    assert [bytes(b) for b in res.buffers] == [store.read_record(p) for p in mixed]


def test_max_bytes_limits_but_the_first_always_comes(open_store):
    store = open_store()
    sizes = []
    for i in range(10):
        sizes.append(store.put_message(message(i, body=b"z" * 100)).wrote_bytes)
    res = store.get_messages("T", 0, 0, 32, max_bytes=3 * sizes[0])
    assert res.message_count == 3 and res.next_begin_offset == 3 and res.total_bytes == 3 * sizes[0]
    res = store.get_messages("T", 0, 5, 32, max_bytes=1)
    assert res.message_count == 1 and res.next_begin_offset == 6


def test_store_times(open_store):
    clock = ManualClock(5_000)
    store = open_store(clock)
    assert store.get_earliest_store_time("T", 0) == -1
    for i in range(3):
        store.put_message(message(i))
        clock.advance(10)
    assert store.get_earliest_store_time("T", 0) == 5_000
    assert [store.get_store_time("T", 0, i) for i in range(4)] == [5_000, 5_010, 5_020, None]


@settings(max_examples=20, deadline=None)
@given(steps=st.lists(st.integers(0, 3), min_size=1, max_size=40), probes=st.lists(st.integers(0, 200), max_size=10))
def test_offset_by_time_is_the_first_at_or_after(steps, probes):
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(100)
        store = MessageStore(make_config(tmp), store_host=STORE_HOST, clock=clock)
        store.start()
        try:
            times = []
            for i, step in enumerate(steps):
                clock.advance(step)
                times.append(clock.now_ms())
                store.put_message(message(i))
            for t in [0, *probes, times[0], times[-1], times[-1] + 1]:
                want = next((i for i, st_ in enumerate(times) if st_ >= t), len(times))
                assert store.get_offset_by_time("T", 0, t) == want
            assert store.get_offset_by_time("Nope", 0, 5) == 0
        finally:
            store.shutdown()
