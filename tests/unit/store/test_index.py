"""IndexFile format, collisions, roll-over, queries by key with time range and count."""

import os

from hypothesis import given
from hypothesis import strategies as st

from skiff.common.clock import ManualClock
from skiff.common.hashing import index_key_hash
from skiff.common.stored_message import decode_record
from skiff.common.sysflag import MessageSysFlag
from skiff.store.dispatcher import DispatchBatch, DispatchRequest
from skiff.store.index_file import ENTRY, HEADER, IndexFile, index_file_size
from skiff.store.index_service import KeyPrefixes, index_items

from .conftest import message

EVER = (0, 2**62)

i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)


@given(st.tuples(i64, i64, i64, i64, i32, i32), st.tuples(i32, i64, i32, i32))
def test_header_and_entry_round_trip(header, entry):
    assert HEADER.unpack(HEADER.pack(*header)) == header
    assert ENTRY.unpack(ENTRY.pack(*entry)) == entry


def test_file_keeps_header_slots_and_chains(tmp_path):
    path = str(tmp_path / "20240101000000000")
    index = IndexFile.create(path, slots=4, capacity=10)
    assert os.path.getsize(path) == index_file_size(4, 10) == 40 + 16 + 200
    index.put_many([x for n, key in enumerate("abaca") for x in (index_key_hash("T", key), 1000 + n, 5_000 + 1000 * n)])
    index.close()
    again = IndexFile.open(path, slots=4, capacity=10)
    assert (again.begin_timestamp, again.end_timestamp) == (5_000, 9_000)
    assert (again.begin_phy_offset, again.end_phy_offset, again.index_count) == (1000, 1004, 6)
    assert list(again.offsets(index_key_hash("T", "a"), *EVER)) == [1004, 1002, 1000]
    assert list(again.offsets(index_key_hash("T", "a"), 6_000, 8_000)) == [1002]
    assert again.truncate_phys(1002) == 3
    assert list(again.offsets(index_key_hash("T", "a"), *EVER)) == [1000]
    assert list(again.offsets(index_key_hash("T", "c"), *EVER)) == []
    again.put_many([index_key_hash("T", "a"), 2000, 20_000])
    assert list(again.offsets(index_key_hash("T", "a"), *EVER)) == [2000, 1000]
    again.close()


def test_collisions_in_one_slot_are_told_apart(open_store):
    store = open_store(maxHashSlotNum=1)
    phys = {}
    for i in range(30):
        phys[i] = store.put_message(message(i, keys=f"key{i % 5}", uniq=f"U{i}")).physical_offset
    got = [decode_record(r).commit_log_offset for r in store.query_by_key("T", "key3", 64, *EVER)]
    assert got == [phys[i] for i in (28, 23, 18, 13, 8, 3)]
    assert [decode_record(r).properties["UNIQ_KEY"] for r in store.query_by_key("T", "U17", 64, *EVER)] == ["U17"]
    assert store.query_by_key("Other", "key3", 64, *EVER) == []
    assert store.query_by_key("T", "key9", 64, *EVER) == []


def test_full_file_rolls_to_a_new_one(open_store):
    store = open_store(maxIndexNum=8)
    for i in range(20):
        store.put_message(message(i, keys=f"k{i} all", uniq=f"U{i}"))
    assert store.stats().index_files >= 6  # 60 keys, 7 per file
    names = sorted(os.listdir(os.path.join(store.root, "index")))
    assert len(names) == store.stats().index_files and all(len(n) == 17 for n in names)
    assert [decode_record(r).body for r in store.query_by_key("T", "k0", 64, *EVER)] == [b"message 0"]
    everyone = store.query_by_key("T", "all", 64, *EVER)
    assert [decode_record(r).body for r in everyone] == [f"message {i}".encode() for i in reversed(range(20))]


def test_time_range_and_max_count(open_store):
    clock = ManualClock(1_700_000_000_000)
    store = open_store(clock)
    times = []
    for i in range(10):
        times.append(clock.now_ms())
        store.put_message(message(i, keys="order-1"))
        clock.advance(1500)
    found = store.query_by_key("T", "order-1", 64, times[2], times[5])
    assert [decode_record(r).store_timestamp for r in found] == times[5:1:-1]
    newest = store.query_by_key("T", "order-1", 3, *EVER)
    assert [decode_record(r).store_timestamp for r in newest] == times[:-4:-1]
    assert len(store.query_by_key("T", "order-1", 1000, *EVER)) == 10
    assert store.query_by_key("T", "order-1", 64, times[-1] + 1, times[-1] + 10_000) == []


def test_index_survives_restart(open_store):
    store = open_store()
    for i in range(10):
        store.put_message(message(i, keys="k", uniq=f"U{i}"))
    root = store.root
    store.shutdown()
    again = open_store(root=root)
    assert len(again.query_by_key("T", "k", 64, *EVER)) == 10
    assert decode_record(again.query_by_key("T", "U3", 64, *EVER)[0]).body == b"message 3"


def test_index_can_be_disabled(open_store):
    store = open_store(messageIndexEnable=False)
    store.put_message(message(1, keys="k"))
    assert store.query_by_key("T", "k", 64, *EVER) == []
    assert not os.path.exists(os.path.join(store.root, "index"))


_TEXT = st.characters(blacklist_categories=("Cs",))
"""What decoded properties can hold: valid UTF-8 has no lone surrogates."""


@given(st.text(_TEXT, min_size=1, max_size=20),
       st.lists(st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), max_size=12),
                min_size=1, max_size=4),
       st.text(_TEXT, max_size=30))
def test_batch_keys_hash_as_index_key_hash(topic, words, uniq):
    """The dispatcher hashes a batch's keys by continuing the CRC of ``topic#``; queries use
    `index_key_hash`: both must agree, in CommitLog order, rolled-back records left out."""
    keys = " ".join(words)
    batch = DispatchBatch.of([
        DispatchRequest(topic, 0, 0, 100, 10, 0, 5, 0, keys, uniq or None),
        DispatchRequest(topic, 0, 0, 110, 10, 0, 6, int(MessageSysFlag.TRANSACTION_ROLLBACK), keys, uniq or None),
        DispatchRequest(topic, 0, 1, 120, 10, 0, 7, 0, None, "u"),
    ])
    expected = [(index_key_hash(topic, uniq), 100, 5)] if uniq else []
    expected += [(index_key_hash(topic, w), 100, 5) for w in words if w]
    expected += [(index_key_hash(topic, "u"), 120, 7)]
    items = index_items(batch, 0, KeyPrefixes())
    assert list(zip(items[::3], items[1::3], items[2::3])) == expected
    assert index_items(batch, 110, KeyPrefixes()) == [index_key_hash(topic, "u"), 120, 7]
