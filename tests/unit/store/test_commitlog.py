"""Appends: record contents, CommitLog roll-over at every boundary, batches, bad input."""

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.common.clock import ManualClock
from skiff.common.msgid import create_offset_msg_id, decode_offset_msg_id
from skiff.common.properties import decode_properties
from skiff.common.record import BLANK_HEAD, BLANK_MAGIC, pack_host, unpack_host
from skiff.common.stored_message import decode_record
from skiff.common.sysflag import MessageSysFlag
from skiff.store import MessageStore, PutStatus

from .conftest import BORN_HOST, STORE_HOST, make_config, message, records_of

FILE = 4096
OVERHEAD = 92  # record bytes besides body and properties for topic "T" and IPv4 hosts


def test_record_holds_every_field(open_store):
    clock = ManualClock(1_700_000_123_456)
    store = open_store(clock)
    m = message(5, queue_id=3, tags="TagA", keys="k1 k2", uniq="U5", extra={"X": "y"})
    r = store.put_message(m)
    assert r.status is PutStatus.PUT_OK and r.message_count == 1
    raw = store.read_record(r.physical_offset)
    assert len(raw) == r.wrote_bytes
    rec = decode_record(raw)
    assert (rec.topic, rec.queue_id, rec.body, rec.flag) == ("T", 3, m.body, m.flag)
    assert rec.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U5", "X": "y"}
    assert (rec.queue_offset, rec.commit_log_offset) == (0, r.physical_offset)
    assert rec.store_timestamp == r.store_timestamp == clock.now_ms()
    assert (rec.born_timestamp, rec.born_host) == (m.born_timestamp, unpack_host(BORN_HOST))
    assert rec.store_host == unpack_host(STORE_HOST)
    assert r.offset_msg_ids == (rec.offset_msg_id,)
    assert decode_offset_msg_id(r.offset_msg_ids[0]).physical_offset == r.physical_offset
    assert store.read_record_by_msg_id(r.offset_msg_ids[0]) == raw
    assert store.read_record_by_msg_id("not-an-id") is None


def test_ipv6_hosts_set_the_sysflag(open_store):
    store = open_store()
    r = store.put_message(message(1, born_host=pack_host("::1", 7)))
    rec = decode_record(store.read_record(r.physical_offset))
    assert rec.sys_flag & MessageSysFlag.BORNHOST_V6
    assert rec.born_host == "::1:7"


def test_record_that_exactly_fills_a_file(open_store):
    store = open_store()
    r1 = store.put_message(message(1, body=b"a" * (FILE - OVERHEAD)))
    assert (r1.physical_offset, r1.wrote_bytes) == (0, FILE)
    r2 = store.put_message(message(2))
    assert r2.physical_offset == FILE
    assert len(store.read_record(0)) == FILE
    res = store.get_messages("T", 0, 0, 10)
    assert [rec.queue_offset for rec in records_of(res)] == [0, 1]
    assert [len(b) for b in res.buffers] == [FILE, r2.wrote_bytes]  # back to back, but two files
    assert store.stats().commitlog_files == 2


@pytest.mark.parametrize("delta", [-9, -8, -7, -1, 0, 1])
def test_roll_over_boundaries(open_store, delta):
    """A second record of (room + delta) bytes fits only if it fills the file or leaves
    room for a blank record (8 bytes); otherwise a blank covers the rest."""
    store = open_store()
    first = store.put_message(message(1, body=b"x" * 1000))
    room = FILE - first.wrote_bytes
    second = store.put_message(message(2, body=b"y" * (room + delta - OVERHEAD)))
    assert second.wrote_bytes == room + delta
    fits = delta == 0 or delta <= -8
    assert second.physical_offset == (first.wrote_bytes if fits else FILE)
    view = store.commitlog.files.find(0).mm
    total, magic = BLANK_HEAD.unpack_from(view, first.wrote_bytes)
    if not fits:
        assert (total, magic) == (room, BLANK_MAGIC)
    if fits and delta <= -8:
        assert store.put_message(message(3, body=b"z")).physical_offset == FILE
        assert BLANK_HEAD.unpack_from(view, FILE + delta)[1] == BLANK_MAGIC
    got = records_of(store.get_messages("T", 0, 0, 10))
    assert [rec.body[:1] for rec in got[:2]] == [b"x", b"y"]
    assert [rec.queue_offset for rec in got] == list(range(len(got)))


def test_batch_rolls_over_whole(open_store):
    store = open_store()
    store.put_message(message(0, body=b"p" * 3200))
    batch = [message(i, body=b"b" * 100) for i in range(5)]
    r = store.put_messages(batch)
    assert r.status is PutStatus.PUT_OK
    assert r.physical_offset == FILE and r.queue_offset == 1 and r.message_count == 5
    assert r.wrote_bytes == 5 * (OVERHEAD + 100)
    phys = [decode_offset_msg_id(i).physical_offset for i in r.offset_msg_ids]
    assert phys == [FILE + k * (OVERHEAD + 100) for k in range(5)]
    got = records_of(store.get_messages("T", 0, 1, 10))
    assert [(rec.queue_offset, rec.commit_log_offset, rec.body) for rec in got] == [
        (1 + k, phys[k], b"b" * 100) for k in range(5)
    ]


def test_batch_across_many_files(open_store):
    store = open_store()
    for n in range(12):
        assert store.put_messages([message(n * 10 + i, body=b"q" * 300) for i in range(3)]).ok
    assert store.stats().commitlog_files == 4
    assert store.get_max_offset("T", 0) == 36
    offsets = []
    nxt = 0
    while nxt < 36:
        res = store.get_messages("T", 0, nxt, 32)
        offsets += [rec.queue_offset for rec in records_of(res)]
        nxt = res.next_begin_offset
    assert offsets == list(range(36))


def _assert_refused(store, result, status, text):
    assert result.status is status
    assert text in result.reason
    assert store.max_physical_offset == 0 and store.get_max_offset("T", 0) == 0


@pytest.mark.parametrize(
    ("msgs", "status", "text"),
    [
        ([message(body=b"x" * 5000)], PutStatus.MESSAGE_ILLEGAL, "maxMessageSize=4096"),
        ([message(extra={"P": "v" * 40_000})], PutStatus.PROPERTIES_SIZE_EXCEEDED, "32767"),
        ([message(topic="t" * 128)], PutStatus.MESSAGE_ILLEGAL, "127"),
        ([message(topic="bad topic")], PutStatus.MESSAGE_ILLEGAL, "characters"),
        ([message(topic="")], PutStatus.MESSAGE_ILLEGAL, "empty"),
        ([message(queue_id=-1)], PutStatus.MESSAGE_ILLEGAL, "queue id"),
        ([message(born_host=b"\x01\x02")], PutStatus.MESSAGE_ILLEGAL, "born host"),
        ([message(1), message(2, queue_id=1)], PutStatus.MESSAGE_ILLEGAL, "one topic and queue"),
        ([], PutStatus.MESSAGE_ILLEGAL, "empty"),
        ([message(body=b"x" * 4000)], PutStatus.MESSAGE_ILLEGAL, "mappedFileSizeCommitLog"),
        ([message(i, body=b"x" * 1000) for i in range(5)], PutStatus.MESSAGE_ILLEGAL, "mappedFileSizeCommitLog"),
    ],
)
def test_bad_input_writes_nothing(open_store, msgs, status, text):
    store = open_store(maxMessageSize=4096)
    _assert_refused(store, store.put_messages(msgs), status, text)
    assert store.stats().put_failures == 1
    assert store.put_message(message(9)).ok


def test_transaction_types(open_store):
    """PREPARED and ROLLBACK records are stored but not consumable; COMMIT is."""
    store = open_store()
    prepared = store.put_message(message(1, sys_flag=MessageSysFlag.TRANSACTION_PREPARED))
    rollback = store.put_message(message(2, sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK))
    commit = store.put_message(message(3, sys_flag=MessageSysFlag.TRANSACTION_COMMIT))
    plain = store.put_message(message(4))
    assert store.get_max_offset("T", 0) == 2
    assert decode_record(store.read_record(prepared.physical_offset)).queue_offset == 0
    assert decode_record(store.read_record(rollback.physical_offset)).body == b"message 2"
    got = records_of(store.get_messages("T", 0, 0, 10))
    assert [rec.commit_log_offset for rec in got] == [commit.physical_offset, plain.physical_offset]
    assert [rec.queue_offset for rec in got] == [0, 1]


def test_not_running_store_refuses(open_store):
    store = open_store()
    store.shutdown()
    assert store.put_message(message()).status is PutStatus.SERVICE_NOT_AVAILABLE


def test_read_record_rejects_offsets_that_are_not_records(open_store):
    store = open_store()
    r = store.put_message(message(1))
    assert store.read_record(r.physical_offset + 1) is None
    assert store.read_record(store.max_physical_offset) is None
    assert store.read_record(-1) is None


batch_st = st.lists(
    st.tuples(st.integers(0, 2), st.lists(st.tuples(st.binary(max_size=700), st.booleans()), min_size=1, max_size=4)),
    min_size=1, max_size=25,
)
V6_HOST = pack_host("fe80::1", 7)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batch_st)
def test_appends_read_back_exactly(batches):
    """Batches (born hosts IPv4 and IPv6 mixed) read back field by field, by id and by pull."""
    with tempfile.TemporaryDirectory() as tmp:
        store = MessageStore(make_config(tmp), store_host=STORE_HOST, clock=ManualClock())
        store.start()
        try:
            expected = {q: [] for q in range(3)}
            n = 0
            for queue_id, items in batches:
                msgs = [message(n + k, queue_id=queue_id, body=b, keys=f"key{n + k}", born_host=V6_HOST if v6 else BORN_HOST)
                        for k, (b, v6) in enumerate(items)]
                n += len(items)
                r = store.put_messages(msgs)
                assert r.ok, r.reason
                phys = r.physical_offset
                for k, (m, msg_id) in enumerate(zip(msgs, r.offset_msg_ids)):
                    assert msg_id == create_offset_msg_id(STORE_HOST, phys)
                    rec = decode_record(store.read_record_by_msg_id(msg_id))
                    assert (rec.body, rec.queue_id, rec.queue_offset) == (m.body, queue_id, r.queue_offset + k)
                    assert (rec.born_host, rec.flag, rec.born_timestamp) == (unpack_host(m.born_host), m.flag,
                                                                             m.born_timestamp)
                    assert bool(rec.sys_flag & MessageSysFlag.BORNHOST_V6) == (m.born_host == V6_HOST)
                    assert decode_properties(m.properties) == rec.properties
                    phys += rec.store_size
                expected[queue_id] += [m.body for m in msgs]
            for queue_id, bodies in expected.items():
                got, nxt = [], 0
                while nxt < len(bodies):
                    res = store.get_messages("T", queue_id, nxt, 32)
                    got += [rec.body for rec in records_of(res)]
                    nxt = res.next_begin_offset
                assert got == bodies
        finally:
            store.shutdown()
