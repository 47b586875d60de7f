"""The duplicate window over UNIQ_KEY (skiff/broker/dedup.py): the window's bounds, and the
appends it lets through on a real store, read back after the store is reopened."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.dedup import Deduplication, DedupWindow, Original
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import ManualClock
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS
from skiff.store import MessageInput, MessageStore, PutResult
from tests.unit.store.conftest import STORE_HOST, make_config, message, records_of

T0 = 1_700_000_000_000
TOPIC = "Orders"


def at(offset: int, ms: int) -> Original:
    return Original(0, offset, f"id{offset}", ms)


def test_the_window_forgets_keys_older_than_its_span() -> None:
    w = DedupWindow(1000)
    w.record("a", at(0, T0))
    w.record("b", at(1, T0 + 500))
    assert w.find("a", T0 + 1000) == at(0, T0)
    assert w.find("a", T0 + 1001) is None
    assert w.find("b", T0 + 1001) == at(1, T0 + 500)
    assert len(w) == 1


def test_the_window_keeps_at_most_its_count_the_oldest_going_first() -> None:
    w = DedupWindow(60_000, max_keys=3)
    for i in range(5):
        w.record(f"k{i}", at(i, T0 + i))
    assert [w.find(f"k{i}", T0) for i in range(5)] == [None, None, at(2, T0 + 2), at(3, T0 + 3), at(4, T0 + 4)]


def test_a_key_keeps_its_first_original() -> None:
    w = DedupWindow(60_000)
    w.record("a", at(0, T0))
    w.record("a", at(7, T0 + 1))
    assert w.find("a", T0 + 1) == at(0, T0)


def test_a_window_needs_a_span_and_a_size() -> None:
    with pytest.raises(ValueError, match="positive"):
        DedupWindow(0)
    with pytest.raises(ValueError, match="positive"):
        DedupWindow(10, max_keys=0)


class Broker:
    def __init__(self, root: Path, clock: ManualClock, window_ms: int | None = 60_000) -> None:
        self.root, self.clock = root, clock
        self.store = MessageStore(make_config(root), store_host=STORE_HOST, clock=clock)
        self.store.start()
        self.topics = TopicConfigManager(BrokerConfig(broker_name="broker-a"), str(root), clock,
                                         schedule_queue_nums=19)
        self.topics.load()
        attrs = {} if window_ms is None else {DEDUP_WINDOW_MS: str(window_ms)}
        self.topics.put(TopicConfig(TOPIC, 4, 4, attributes=attrs))
        self.dedup = Deduplication(self.store, self.topics, clock.now_ms)

    def send(self, queue_id: int, rows: list[MessageInput]) -> tuple[PutResult, int]:
        window = self.dedup.window(TOPIC)
        assert window is not None
        return self.dedup.append(window, queue_id, rows, sum(len(r.body) for r in rows),
                                 lambda rs, _: self.store.put_messages(rs))

    def stored(self) -> list[bytes]:
        """Every body the topic's queues hold."""
        out = []
        for q in range(4):
            got = self.store.get_messages(TOPIC, q, 0, 1000)
            out += [m.body for m in records_of(got)] if got.found else []
        return sorted(out)


def row(i: int, queue_id: int = 0, uniq: str | None = "") -> MessageInput:
    return message(i, topic=TOPIC, queue_id=queue_id, body=f"body{i:03d}".encode(),
                   uniq=f"U{i:031d}" if uniq == "" else uniq)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path, ManualClock(T0))
    yield b
    b.store.shutdown()


def test_a_duplicate_is_answered_with_its_original_and_not_stored(broker: Broker) -> None:
    first, q1 = broker.send(1, [row(0, 1)])
    again, q2 = broker.send(3, [row(0, 3)])  # a retry on another queue
    assert (q2, again.queue_offset, again.offset_msg_ids) == (q1, first.queue_offset, first.offset_msg_ids) == (
        1, 0, first.offset_msg_ids)
    assert again.ok and again.message_count == 0
    assert broker.stored() == [b"body000"]


def test_a_batch_stores_only_its_new_messages(broker: Broker) -> None:
    old, _ = broker.send(0, [row(1)])
    result, queue = broker.send(2, [row(1, 2), row(2, 2), row(2, 2), row(3, 2)])  # row 2 twice in the batch
    assert queue == 2 and result.ok and result.message_count == 2 and result.queue_offset == 0
    ids = result.offset_msg_ids
    assert ids[0] == old.offset_msg_ids[0] and ids[1] == ids[2] and len(set(ids)) == 3
    assert broker.stored() == [b"body001", b"body002", b"body003"]
    whole, queue = broker.send(1, [row(2, 1), row(3, 1)])  # all stored already: the first's original
    assert (queue, whole.queue_offset, whole.offset_msg_ids, whole.message_count) == (2, 0, ids[2:], 0)


def test_messages_without_an_id_or_past_the_window_are_stored(broker: Broker) -> None:
    broker.send(0, [row(1, uniq=None)])
    broker.send(0, [row(1, uniq=None)])
    broker.send(0, [row(2)])
    broker.clock.advance(60_001)
    later, _ = broker.send(0, [row(2)])
    assert later.queue_offset == 3 and later.message_count == 1
    assert broker.stored() == [b"body001", b"body001", b"body002", b"body002"]


def test_the_window_is_read_back_from_the_store_after_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    b = Broker(tmp_path, clock)
    b.send(0, [row(0)])
    clock.advance(30_000)
    firsts = {i: b.send(i % 4, [row(i, i % 4)])[0] for i in range(1, 9)}
    b.store.shutdown()
    clock.advance(30_001)  # row 0 is now past the window, the others within it
    b = Broker(tmp_path, clock)
    for i in range(1, 9):
        again, queue = b.send(0, [row(i)])
        assert (queue, again.queue_offset, again.offset_msg_ids) == (
            i % 4, firsts[i].queue_offset, firsts[i].offset_msg_ids)
    stored_again, _ = b.send(0, [row(0)])
    assert stored_again.message_count == 1
    assert b.stored() == sorted([b"body000"] * 2 + [f"body{i:03d}".encode() for i in range(1, 9)])
    b.store.shutdown()


def test_a_new_master_term_reads_the_window_back(broker: Broker) -> None:
    epoch = [0]
    broker.dedup = Deduplication(broker.store, broker.topics, broker.clock.now_ms, lambda: epoch[0])
    broker.send(0, [row(1)])
    broker.store.put_messages([row(2, 1)])  # stored under another master's term (replicated here)
    assert broker.send(1, [row(2, 1)])[0].message_count == 1  # the window of the old term missed it
    epoch[0] = 1
    again, queue = broker.send(0, [row(2)])
    assert (again.message_count, queue, again.queue_offset) == (0, 1, 0)


def test_a_topic_deleted_and_made_again_starts_an_empty_window(broker: Broker) -> None:
    broker.send(0, [row(1)])
    broker.topics.delete(TOPIC)
    broker.store.delete_topic(TOPIC)
    broker.topics.put(TopicConfig(TOPIC, 4, 4, attributes={DEDUP_WINDOW_MS: "60000"}))
    again, _ = broker.send(0, [row(1)])
    assert (again.message_count, again.queue_offset) == (1, 0)
    assert broker.stored() == [b"body001"]


def test_a_topic_without_the_attribute_has_no_window(tmp_path: Path) -> None:
    b = Broker(tmp_path, ManualClock(T0), window_ms=None)
    assert b.dedup.window(TOPIC) is None and not b.dedup.covers(TOPIC)
    b.topics.put(TopicConfig(TOPIC, 4, 4, attributes={DEDUP_WINDOW_MS: "0"}))
    assert b.dedup.window(TOPIC) is None
    b.store.shutdown()
