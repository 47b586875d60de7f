"""Idempotent producers' state: what a restarted broker reads back (the snapshot's form and
the batch property) decides duplicates and gaps as the state it was taken from."""

from __future__ import annotations

from skiff.broker.kafka.idempotence import ProducerStates, batch_property, parse_batch_property
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import RecordBatch

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
