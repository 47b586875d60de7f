"""Idempotent produce: Kafka's per producer-id and partition sequence checks.

Each batch of an idempotent producer carries its producer id, epoch and base sequence.
As Kafka's broker (``ProducerAppendInfo``): a batch whose first and last sequences match
one of the producer's last five batches on the partition is a retry of it, answered with
the original base offset and not stored again; a batch that does not continue the last
sequence is refused OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH,
a newer one must start at sequence 0; a producer the partition has no state for may
start anywhere (KIP-360). Producer ids come from `ProducerIds`: the broker's start time
in milliseconds shifted left, plus a counter, so ids of one broker never repeat across
restarts.

The state is held in memory: a broker restart forgets it, and the first batch after the
restart is accepted as a new producer's (a retry sent across a restart may be stored twice).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

from skiff.common.limits import KAFKA_PRODUCER_BATCHES_KEPT, KAFKA_PRODUCER_STATES_MAX
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import RecordBatch

_INT32_SPAN = 1 << 31


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    error: ErrorCode = ErrorCode.NONE
    reason: str = ""
    duplicate_of: int | None = None
    """A retry of a batch stored already: its base offset."""


@dataclass(slots=True)
class _State:
    epoch: int
    batches: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=KAFKA_PRODUCER_BATCHES_KEPT))
    """(first sequence, last sequence, base offset) of the last batches stored."""


_OK = SequenceCheck()


class ProducerStates:
    def __init__(self) -> None:
        self._states: dict[tuple[str, int, int], _State] = {}

    def check(self, topic: str, queue_id: int, batch: RecordBatch) -> SequenceCheck:
        if batch.producer_id < 0:
            return _OK
        state = self._states.get((topic, queue_id, batch.producer_id))
        if state is None:
            return _OK
        first = batch.base_sequence
        if batch.producer_epoch < state.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 f"producer {batch.producer_id} epoch {batch.producer_epoch} is older than "
                                 f"{state.epoch}")
        if batch.producer_epoch > state.epoch:
            if first != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"a new epoch {batch.producer_epoch} must start at sequence 0, not {first}")
            return _OK
        last = (first + batch.last_offset_delta) % _INT32_SPAN
        for f, l, base in state.batches:
            if f == first and l == last:
                return SequenceCheck(duplicate_of=base)
        expected = (state.batches[-1][1] + 1) % _INT32_SPAN if state.batches else first
        if first != expected:
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"producer {batch.producer_id} sent sequence {first} on {topic}-{queue_id}, "
                                 f"{expected} was expected")
        return _OK

    def appended(self, topic: str, queue_id: int, batch: RecordBatch, base_offset: int) -> None:
        if batch.producer_id < 0:
            return
        key = (topic, queue_id, batch.producer_id)
        state = self._states.get(key)
        if state is None or batch.producer_epoch > state.epoch:
            if state is None and len(self._states) >= KAFKA_PRODUCER_STATES_MAX:
                self._states.pop(next(iter(self._states)))  # the oldest producer's state goes first
            state = self._states[key] = _State(batch.producer_epoch)
        last = (batch.base_sequence + batch.last_offset_delta) % _INT32_SPAN
        state.batches.append((batch.base_sequence, last, base_offset))


class ProducerIds:
    """Producer ids unique per broker across restarts: start time (ms) << 16 plus a counter."""

    def __init__(self) -> None:
        self._ids = itertools.count((int(time.time() * 1000) << 16) & ((1 << 62) - 1))

    def next(self) -> int:
        return next(self._ids)
