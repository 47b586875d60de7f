"""The timer's byte layouts and its wheel, on their own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.common.errors import CorruptionError
from skiff.store.timer.formats import (
    DISPATCH_RECORD,
    Outcome,
    Progress,
    SlotLength,
    decode_checkpoint,
    decode_dispatch,
    decode_progress,
    encode_checkpoint,
    encode_dispatch,
    encode_progress,
)
from skiff.store.timer.wheel import Wheel

I64 = st.integers(min_value=0, max_value=2**62)
I32 = st.integers(min_value=0, max_value=2**31 - 1)


@given(st.dictionaries(I32, I64, max_size=20), st.dictionaries(I64, st.tuples(I64, I64), max_size=20), I64)
def test_progress_round_trips(queues: dict[int, int], slots: dict[int, tuple[int, int]], written_ms: int) -> None:
    progress = Progress(queues, {s: SlotLength(*v) for s, v in slots.items()})
    assert decode_progress(encode_progress(progress, written_ms), "p") == progress


@given(st.binary(max_size=200))
def test_damaged_progress_is_refused(noise: bytes) -> None:
    good = encode_progress(Progress({1: 5}, {60_000: SlotLength(100, 2)}), 7)
    damaged = good[: len(good) // 2] + noise
    if damaged != good:
        with pytest.raises(CorruptionError):
            decode_progress(damaged, "p")


@given(I64, I64)
def test_checkpoint_round_trips(offset: int, written_ms: int) -> None:
    raw = encode_checkpoint(offset, written_ms)
    assert decode_checkpoint(raw, "c") == offset
    with pytest.raises(CorruptionError):
        decode_checkpoint(raw[:-1] + bytes([raw[-1] ^ 1]), "c")


@given(st.lists(st.tuples(st.sampled_from(list(Outcome)), I64), max_size=30), st.integers(0, 15))
def test_dispatch_records_decode_up_to_a_torn_tail(records: list[tuple[Outcome, int]], torn: int) -> None:
    raw = b"".join(encode_dispatch(kind, [timer_id]) for kind, timer_id in records)
    outcomes, valid = decode_dispatch(raw + b"\x53\x4b\x54\x44\x00\x00\x00\x09"[:torn])
    assert valid == len(raw) == DISPATCH_RECORD.size * len(records)
    assert outcomes == {timer_id: kind for kind, timer_id in records}


def test_a_bad_dispatch_record_ends_the_valid_part() -> None:
    raw = encode_dispatch(Outcome.DELIVERED, [1, 2]) + b"\x00" * 16 + encode_dispatch(Outcome.DELIVERED, [3])
    assert decode_dispatch(raw) == ({1: Outcome.DELIVERED, 2: Outcome.DELIVERED}, 32)


def rows(*dues: int) -> np.ndarray:
    return np.array([(due, 1000 + i, 0, 10 * i, 50) for i, due in enumerate(dues)], dtype=np.int64).reshape(-1, 5)


def test_the_wheel_gives_whole_ticks_once_they_end() -> None:
    wheel = Wheel(100)
    wheel.add_rows(rows(1_050, 1_000, 1_099, 1_100, 5_000))
    assert len(wheel.take_due(1_099, 100)) == 0
    assert sorted(wheel.take_due(1_100, 100)[:, 0].tolist()) == [1_000, 1_050, 1_099]
    assert wheel.take_due(1_150, 100)[:, 0].tolist() == []
    assert wheel.take_due(9_999, 100)[:, 0].tolist() == [1_100, 5_000]
    assert wheel.size == 0


def test_the_wheel_takes_at_most_the_limit_and_keeps_the_rest() -> None:
    wheel = Wheel(100)
    wheel.add_rows(rows(*[1_000] * 7, 900))
    first = wheel.take_due(2_000, 3)
    assert first[:, 0].tolist() == [900, 1_000, 1_000]
    rest = wheel.take_due(2_000, 100)
    assert len(rest) == 5 and wheel.size == 0
    assert sorted(first[:, 1].tolist() + rest[:, 1].tolist()) == list(range(1000, 1008))


def test_the_wheel_removes_rows_even_when_deferred() -> None:
    wheel = Wheel(100)
    wheel.add((1_000, 1, 0, 0, 50))
    wheel.add((1_000, 2, 0, 50, 50), not_before_ms=4_000)  # a retry held back
    assert wheel.contains(1_000, 2) and wheel.remove(1_000, 2) and not wheel.contains(1_000, 2)
    assert wheel.remove(1_000, 1) and not wheel.remove(1_000, 1)
    assert wheel.size == 0 and len(wheel.take_due(10_000, 10)) == 0
