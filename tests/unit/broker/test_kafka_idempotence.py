"""Idempotent producers' state: what a restarted broker reads back (the snapshot's form and
the batch property) decides duplicates and gaps as the state it was taken from."""

from __future__ import annotations

from pathlib import Path

from skiff.broker.kafka.idempotence import PRODUCER_PROPERTY, ProducerStates, batch_property, parse_batch_property
from skiff.broker.kafka.producer_snapshot import ProducerSnapshots
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import RecordBatch
from skiff.store import MessageStore
from tests.unit.store.conftest import STORE_HOST, make_config, message

PID = 7 << 16


def _batch(first: int, count: int, epoch: int = 0) -> RecordBatch:
    return RecordBatch(0, 0, count - 1, 0, 0, PID, epoch, first)


def test_snapshot_form_keeps_duplicates_and_gaps() -> None:
    states = ProducerStates()
    states.appended("t", 0, _batch(0, 3), 0)
    states.appended("t", 0, _batch(3, 2), 3)
    restored = ProducerStates()
    restored.load_obj(states.to_obj(), lambda topic, queue_id: 5)
    assert restored.check("t", 0, _batch(3, 2)).duplicate_of == 3
    assert restored.check("t", 0, _batch(0, 3)).duplicate_of == 0
    assert restored.check("t", 0, _batch(6, 1)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert restored.check("t", 0, _batch(5, 1)).error is ErrorCode.NONE


def test_batches_past_the_queue_end_are_dropped() -> None:
    states = ProducerStates()
    states.appended("t", 0, _batch(0, 3), 0)
    states.appended("t", 0, _batch(3, 2), 3)
    restored = ProducerStates()
    restored.load_obj(states.to_obj(), lambda topic, queue_id: 4)  # the store lost offset 4, half a batch
    assert restored.check("t", 0, _batch(3, 2)).duplicate_of is None  # stored again: it is not all there
    assert restored.check("t", 0, _batch(0, 3)).duplicate_of == 0


def test_a_replayed_batch_is_recorded_once() -> None:
    states = ProducerStates()
    states.appended("t", 0, _batch(0, 3), 0)
    text = batch_property(_batch(0, 3))
    assert text is not None and parse_batch_property(text) == (PID, 0, 0, 2)
    version = states.version
    states.record("t", 0, PID, 0, 0, 2, 0)  # read back from the CommitLog, known from the snapshot
    assert states.version == version
    states.record("t", 0, PID, 0, 3, 4, 3)  # stored after the snapshot
    assert states.check("t", 0, _batch(3, 2)).duplicate_of == 3
    assert parse_batch_property("1 2 x 4") is None


# -- the state read from a CommitLog (a slave's, an elected master's) ----------------------

def _stored_batch(store: MessageStore, first: int, count: int, epoch: int = 0) -> None:
    """An idempotent batch as Produce stores it: one message per record, the property on the last."""
    for i in range(count):
        extra = {PRODUCER_PROPERTY: f"{PID} {epoch} {first} {first + count - 1}"} if i == count - 1 else None
        assert store.put_message(message(first + i, topic="t", extra=extra)).ok


def _snapshots(store: MessageStore, root: Path) -> ProducerSnapshots:
    return ProducerSnapshots(ProducerStates(), store, str(root))


def test_a_follower_reads_the_batches_it_holds(tmp_path: Path) -> None:
    store = MessageStore(make_config(tmp_path, mappedFileSizeCommitLog=1 << 16), store_host=STORE_HOST)
    store.start()
    try:
        for n in range(40):  # RocketMQ messages around the batches: skipped by the byte search
            assert store.put_message(message(n, topic="other")).ok
        _stored_batch(store, 0, 3)
        follower = _snapshots(store, tmp_path)
        assert follower.follow() == 1
        _stored_batch(store, 3, 2)
        assert follower.follow() == 1  # only what arrived since the last round
        assert follower.states.check("t", 0, _batch(3, 2)).duplicate_of == 3
        assert follower.states.check("t", 0, _batch(0, 3)).duplicate_of == 0
        assert follower.states.check("t", 0, _batch(6, 1)).error is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert follower.covered == store.max_physical_offset
    finally:
        store.shutdown()


def test_a_truncation_reads_the_commitlog_again(tmp_path: Path) -> None:
    """A follower (or a demoted leader) whose tail is cut forgets the batches that were there:
    a retry of one is a new batch, not a duplicate of a record no longer stored."""
    store = MessageStore(make_config(tmp_path, mappedFileSizeCommitLog=1 << 16), store_host=STORE_HOST)
    store.start()
    try:
        _stored_batch(store, 0, 3)
        cut = store.max_physical_offset
        _stored_batch(store, 3, 2)
        follower = _snapshots(store, tmp_path)
        assert follower.follow() == 2
        store.truncate(cut)
        for n in range(2):  # the new master's records where the batch was, before the next round
            assert store.put_message(message(n, topic="t")).ok
        assert follower.follow() == 1  # read again from the start: only the first batch is there
        assert follower.states.check("t", 0, _batch(3, 2)).duplicate_of is None
        assert follower.states.check("t", 0, _batch(0, 3)).duplicate_of == 0

        leader = _snapshots(store, tmp_path / "leader")
        assert leader.follow() == 1
        led_from = store.max_physical_offset
        leader.lead()
        leader.states.appended("t", 0, _batch(3, 2), 5)  # Produce records it as it appends it
        _stored_batch(store, 3, 2)
        leader.step_down()
        store.truncate(led_from)  # demoted: what it stored as master is cut, nothing below what it read
        assert leader.follow() == 1
        assert leader.states.check("t", 0, _batch(3, 2)).duplicate_of is None

        leader.lead()  # elected again: demoted, cut and re-elected before a round saw the step-down
        leader.states.appended("t", 0, _batch(3, 2), 5)
        _stored_batch(store, 3, 2)
        store.truncate(led_from)
        assert not leader.leading  # Produce waits for a walk
        assert leader.follow() == 1
        assert leader.states.check("t", 0, _batch(3, 2)).duplicate_of is None
    finally:
        store.shutdown()
