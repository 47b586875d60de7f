"""The store's compiled kernels (skiff.store._kernels) give exactly what their pure-Python
references in the store's modules give, on the same hypothesis inputs (good, cut and
damaged): the same bytes written, the same results, the same refusals."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.common import kernels
from skiff.common.record import BLANK_MAGIC, HOST_V4_BYTES, HOST_V6_BYTES, pack_records_py, record_size
from skiff.store.checks import batch_columns_py
from skiff.store.consume_queue import put_queue_entries_py
from skiff.store.index_file import put_index_entries_py
from skiff.store.index_service import KeyPrefixes, index_key_items_py
from skiff.store.run_write import offset_msg_ids_py
from skiff.store.replicated import replicated_columns_py
from skiff.store.results import MessageInput
from tests.unit.kernel_twins import compiled_kernels

SETTINGS = settings(max_examples=60, deadline=None)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
HOST = st.sampled_from([HOST_V4_BYTES, HOST_V6_BYTES]).flatmap(lambda n: st.binary(min_size=n, max_size=n))
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
STORE = "skiff.store._kernels"
NAMES = ("index_key_items", "put_index_entries", "put_queue_entries", "offset_msg_ids", "batch_columns",
         "replicated_columns", "write_run")


compiled = compiled_kernels(STORE)


def test_each_store_reference_has_a_compiled_twin_when_built():
    if kernels.compiled("put_queue_entries", STORE) is None:
        pytest.skip("the compiled kernels are not built here")
    assert all(callable(kernels.compiled(n, STORE)) for n in NAMES)
    assert not any(kernels.compiled(n) for n in NAMES)  # not left in skiff.common._kernels as well


keys = st.one_of(st.none(), st.lists(st.text("ab é", max_size=4), max_size=4).map(" ".join))


@SETTINGS
@given(records=st.lists(st.tuples(st.sampled_from(["T", "Ü"]), st.sampled_from([0, 4, 8, 12, 3, 15]), keys, keys),
                        max_size=20),
       start=st.integers(0, 5))
def test_index_key_items_is_identical(records, start):
    kernel = compiled("index_key_items")
    topics = [r[0] for r in records]
    columns = (topics, list(range(100, 100 + len(records))), [7] * len(records), [r[1] for r in records],
               [r[2] for r in records], [r[3] for r in records])
    assert kernel(*columns, start, KeyPrefixes()) == index_key_items_py(*columns, start, KeyPrefixes())


@SETTINGS
@given(triples=st.lists(st.tuples(st.integers(0, 2**31 - 1), INT64, st.integers(0, 2**45)), min_size=1,
                        max_size=30),
       slots=st.integers(1, 16), number=st.integers(1, 5), begin=st.integers(0, 2**44),
       prefill=st.lists(st.integers(0, 40), max_size=16))
def test_put_index_entries_is_identical(triples, slots, number, begin, prefill):
    kernel = compiled("put_index_entries")
    items = [v for t in triples for v in t]
    size = 40 + 4 * slots + 20 * (number + len(triples))
    results = []
    for fn in (put_index_entries_py, kernel):
        buf = mmap.mmap(-1, size)
        for i, prev in enumerate(prefill[:slots]):
            buf[40 + 4 * i : 44 + 4 * i] = prev.to_bytes(4, "big")
        added = fn(buf, slots, 40 + 4 * slots + 20 * number, number, items, len(triples), begin)
        results.append((added, bytes(buf)))
    assert results[0] == results[1]


@SETTINGS
@given(entries=st.lists(st.tuples(INT64, INT32, INT64), max_size=20), first=st.integers(0, 3), pos=st.integers(0, 40))
def test_put_queue_entries_is_identical(entries, first, pos):
    kernel = compiled("put_queue_entries")
    first = min(first, len(entries))
    columns = [list(c) for c in zip(*entries)] or [[], [], []]
    outs = []
    for fn in (put_queue_entries_py, kernel):
        buf = bytearray(pos + 20 * len(entries))
        fn(buf, pos, *columns, first, len(entries))
        outs.append(bytes(buf))
    assert outs[0] == outs[1]


@SETTINGS
@given(host=HOST, offsets=st.lists(st.integers(0, 2**63 - 1), max_size=10))
def test_offset_msg_ids_are_identical(host, offsets):
    assert compiled("offset_msg_ids")(host, offsets) == offset_msg_ids_py(host, offsets)


inputs = st.builds(
    MessageInput, topic=st.sampled_from(["T", "U"]), queue_id=st.sampled_from([0, 1]), body=st.binary(max_size=40),
    properties=st.one_of(st.binary(max_size=40), st.just(b"x" * 32768)), flag=INT32,
    sys_flag=st.sampled_from([0, 4, 8, 12, 1]), born_timestamp=INT64,
    born_host=st.sampled_from([bytes(8), bytes(20), bytes(5)]), reconsume_times=st.just(0),
    prepared_transaction_offset=st.just(0), tags=st.one_of(st.none(), TEXT), keys=keys,
    uniq_key=st.one_of(st.none(), TEXT),
)


@SETTINGS
@given(msgs=st.lists(inputs, min_size=1, max_size=12), max_body=st.integers(0, 40))
def test_batch_columns_is_identical_and_finds_the_same_refusal(msgs, max_body):
    args = (msgs, msgs[0].topic, msgs[0].queue_id, max_body, 97)
    assert compiled("batch_columns")(*args) == batch_columns_py(*args)


PROP_ITEM = st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "X", "", "TAG", "KEYS\x01"]),
                      st.text(max_size=6).map(str.encode) | st.binary(max_size=6))
PROPS = st.lists(PROP_ITEM, max_size=5).map(lambda items: b"\x02".join(n.encode() + b"\x01" + v for n, v in items)) \
    | st.binary(max_size=30)


def _commitlog_bytes(records, start, file_size, store_host):
    """Records laid out as a CommitLog from ``start``, a blank where one does not fit its file."""
    out = bytearray()
    for i, (topic, queue_id, body, props, sys_flag, born_host) in enumerate(records):
        phys = start + len(out)
        size = record_size(len(body), len(topic), len(props), len(born_host), len(store_host))
        room = file_size - phys % file_size
        if size + 8 > room:
            out += BLANK_MAGIC.to_bytes(4, "big", signed=True).rjust(8, b"\0")
            out[-8:-4] = room.to_bytes(4, "big")
            out += bytes(room - 8)
            phys += room
        row = ("T", queue_id, body, props, 3, sys_flag, 11, born_host, 0, 0)
        out += pack_records_py([row], topic, [i], [phys], [size], 1_000 + i, store_host)
    return bytes(out)


@SETTINGS
@given(records=st.lists(st.tuples(st.sampled_from([b"T", b"Topic\xff", b"A" * 30]), st.integers(0, 9),
                                  st.binary(max_size=80), PROPS, st.sampled_from([0, 4, 8, 12, 3]), HOST),
                        min_size=1, max_size=12),
       store_host=HOST, start_file=st.integers(0, 3), start_in=st.sampled_from([0, 100]),
       cut=st.integers(0, 200), flip=st.integers(0, 2000), junk=st.binary(max_size=40))
def test_replicated_columns_is_identical_on_good_cut_and_damaged_bytes(records, store_host, start_file, start_in,
                                                                       cut, flip, junk):
    kernel = compiled("replicated_columns")
    file_size = 700
    start = start_file * file_size + start_in
    data = _commitlog_bytes(records, start, file_size, store_host)
    damaged = bytearray(data)
    damaged[flip % len(data)] ^= 0x41
    for run in (data, data[: max(0, len(data) - cut)], data + junk, bytes(damaged), bytearray(damaged)):
        assert kernel(run, start, file_size) == replicated_columns_py(run, start, file_size)
    assert kernel(memoryview(data), start, file_size)[:2] == (len(data), -1)


def test_put_index_entries_fetching_slots_ahead_changes_nothing_written_before_a_bad_hash():
    """Slots are fetched 16 keys ahead; a bad hash 20 keys in is still refused only when the
    loop reaches it, after the 20 entries before it were written as the reference writes them."""
    kernel = compiled("put_index_entries")
    triples = [(i * 7919 % 2**31, 1000 + i, 5000) for i in range(40)]
    bad = [v for t in triples[:20] for v in t] + [2**40, 1, 1] + [v for t in triples[21:] for v in t]
    good = [v for t in triples[:20] for v in t]
    size = 40 + 4 * 64 + 20 * 42
    into_kernel, into_py = mmap.mmap(-1, size), mmap.mmap(-1, size)
    with pytest.raises((ValueError, OverflowError)):
        kernel(into_kernel, 64, 40 + 4 * 64 + 20, 1, bad, 40, 0)
    put_index_entries_py(into_py, 64, 40 + 4 * 64 + 20, 1, good, 20, 0)
    assert bytes(into_kernel) == bytes(into_py)


def test_kernels_refuse_short_columns_and_small_buffers_instead_of_overrunning():
    with pytest.raises(IndexError):
        compiled("put_queue_entries")(bytearray(100), 0, [1, 2], [1], [1, 2], 0, 2)
    with pytest.raises(ValueError):
        compiled("put_queue_entries")(bytearray(30), 0, [1, 2], [1, 2], [1, 2], 0, 2)
    with pytest.raises(IndexError):
        compiled("index_key_items")(["T", "T"], [1], [1, 1], [0, 0], [None, None], ["a", "b"], 0, {"T": 5})
    with pytest.raises(ValueError):
        compiled("put_index_entries")(bytearray(60), 1, 44, 1, [1, 2, 3], 1, 0)
    with pytest.raises(ValueError):
        compiled("put_index_entries")(bytearray(100), 0, 40, 1, [1, 2, 3], 1, 0)
