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

A batch is recorded when the store has appended it, before any wait for the flush or a
slave: a retry of a batch whose answer timed out is still a duplicate. The state survives
restarts through `skiff.broker.kafka.producer_snapshot`: each batch's last message
carries `PRODUCER_PROPERTY` (``producer-id epoch first-sequence last-sequence``), and a
restarted broker reads its last snapshot and then the batches stored after it.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from skiff.common.limits import KAFKA_PRODUCER_BATCHES_KEPT, KAFKA_PRODUCER_STATES_MAX
from skiff.protocol.kafka.errors import ErrorCode
from skiff.protocol.kafka.records import RecordBatch

_INT32_SPAN = 1 << 31
PRODUCER_PROPERTY = "KAFKA_PRODUCER"
"""The property on an idempotent batch's last stored message that records the batch (the
last: a batch cut by a crash's torn tail is not read back as stored)."""


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
        self.version = 0
        """Counts the batches recorded: a snapshot is due when it moved."""

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
        if batch.producer_id >= 0:
            last = (batch.base_sequence + batch.last_offset_delta) % _INT32_SPAN
            self.record(topic, queue_id, batch.producer_id, batch.producer_epoch, batch.base_sequence, last,
                        base_offset)

    def record(self, topic: str, queue_id: int, producer_id: int, epoch: int, first: int, last: int,
               base_offset: int) -> None:
        """A batch stored at ``base_offset``; one recorded already (replayed) changes nothing."""
        key = (topic, queue_id, producer_id)
        state = self._states.get(key)
        if state is not None and (epoch < state.epoch or (epoch == state.epoch and state.batches
                                                          and state.batches[-1][2] >= base_offset)):
            return  # older than what is known: a replay of a batch the snapshot holds
        if state is None or epoch > state.epoch:
            if state is None and len(self._states) >= KAFKA_PRODUCER_STATES_MAX:
                self._states.pop(next(iter(self._states)))  # the oldest producer's state goes first
            state = self._states[key] = _State(epoch)
        state.batches.append((first, last, base_offset))
        self.version += 1

    def clear(self) -> None:
        """Forget every state (the CommitLog they were read from was cut: it is read again)."""
        self._states.clear()
        self.version += 1

    def to_obj(self) -> list[list[object]]:
        """Every state as JSON: [topic, queue id, producer id, epoch, [[first, last, base], ...]]."""
        return [[t, q, pid, st.epoch, [list(b) for b in st.batches]] for (t, q, pid), st in self._states.items()]

    def load_obj(self, states: list[list[object]], queue_end: Callable[[str, int], int]) -> None:
        """Adopt `to_obj`'s states, without batches that reach past their queue's end (a store
        that lost its tail in a crash: those batches are not all there to be duplicated)."""
        for topic, queue_id, pid, epoch, batches in states:
            assert isinstance(topic, str) and isinstance(queue_id, int) and isinstance(pid, int)
            assert isinstance(epoch, int) and isinstance(batches, list)
            end = queue_end(topic, queue_id)
            state = _State(epoch)
            state.batches.extend((int(f), int(l), int(b)) for f, l, b in batches
                                 if int(b) + batch_count(int(f), int(l)) <= end)
            if state.batches:
                self._states[(topic, queue_id, pid)] = state


def batch_count(first: int, last: int) -> int:
    """Records in a batch of sequences ``first`` to ``last`` (sequences wrap at 2^31)."""
    return (last - first) % _INT32_SPAN + 1


def batch_property(batch: RecordBatch) -> str | None:
    """`PRODUCER_PROPERTY`'s value for an idempotent batch (None for another)."""
    if batch.producer_id < 0:
        return None
    last = (batch.base_sequence + batch.last_offset_delta) % _INT32_SPAN
    return f"{batch.producer_id} {batch.producer_epoch} {batch.base_sequence} {last}"


def parse_batch_property(text: str) -> tuple[int, int, int, int] | None:
    """(producer id, epoch, first sequence, last sequence) of `batch_property`'s text."""
    parts = text.split()
    if len(parts) != 4 or not all(p.lstrip("-").isdigit() for p in parts):
        return None
    pid, epoch, first, last = map(int, parts)
    return pid, epoch, first, last


class ProducerIds:
    """Producer ids unique per broker across restarts: start time (ms) << 16 plus a counter."""

    def __init__(self) -> None:
        self._ids = itertools.count((int(time.time() * 1000) << 16) & ((1 << 62) - 1))

    def next(self) -> int:
        return next(self._ids)
