"""Stops and crashes in the middle: nothing lost, nothing delivered twice, nothing early."""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pytest

from skiff.common.clock import ManualClock
from skiff.common.errors import CorruptionError
from skiff.common.properties import Prop
from skiff.store.timer.formats import slot_file_name
from tests.unit.store.timer.conftest import SLOT_MS, T0, TICK_MS, Rig

NEVER_MS = 3_600_000
"""timerFlushIntervalMs that keeps commits and checkpoints to the ones a test asks for."""


def schedule(rig: Rig, rng: random.Random, count: int, span_ms: int, prefix: str = "m") -> dict[str, int]:
    dues = {f"{prefix}{i}": T0 + rng.randrange(span_ms) for i in range(count)}
    for uniq, due in dues.items():
        rig.park(uniq, due, queue_id=rng.randrange(4), schedule_queue=rng.choice((0, 5, 18)))
    return dues


def check_exactly_once(rig: Rig, dues: dict[str, int]) -> None:
    delivered = rig.delivered()
    counts = Counter(m.properties[Prop.UNIQ_KEY] for m in delivered)
    assert sorted(counts) == sorted(dues), "lost or unexpected messages"
    assert [k for k, n in counts.items() if n > 1] == [], "delivered twice"
    early = [m.properties[Prop.UNIQ_KEY] for m in delivered if m.store_timestamp < dues[m.properties[Prop.UNIQ_KEY]]]
    assert early == []


def test_stop_and_reopen_in_the_middle(rig: Rig) -> None:
    dues = schedule(rig, random.Random(5), 80, 3 * SLOT_MS)
    rig.advance_to(T0 + SLOT_MS + 12_345)
    delivered_before = len(rig.delivered())
    assert 0 < delivered_before < len(dues)
    rig.close()
    report = rig.open()
    assert report.scheduled == len(dues) - delivered_before and report.deliveries_recovered == 0
    rig.advance_to(T0 + 3 * SLOT_MS + 1_000)
    check_exactly_once(rig, dues)


def test_a_crash_between_the_put_and_the_dispatch_log(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock, timerFlushIntervalMs=NEVER_MS)
    dues = {f"m{i}": T0 + 500 + 10 * i for i in range(30)}
    for uniq, due in dues.items():
        rig.park(uniq, due)
    rig.timer.replay_pending()
    rig.timer.replayer.commit()
    rig.advance_to(T0 + 700)  # some delivered: stored, with no dispatch record yet
    stored = len(rig.delivered())
    assert 0 < stored < len(dues)
    report = rig.crash_and_reopen()
    assert report.deliveries_recovered == stored
    assert report.commitlog_scanned_bytes > 0
    rig.advance_to(T0 + 2_000)
    check_exactly_once(rig, dues)


def test_a_crash_before_the_replay_commit_cuts_and_replays_again(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock, timerFlushIntervalMs=NEVER_MS)
    rig.park("first", T0 + 300)
    rig.park("far", T0 + 2 * SLOT_MS)
    rig.timer.replay_pending()
    rig.timer.replayer.commit()
    rig.park("second", T0 + 400)  # appended to slot T0's log, not committed
    rig.park("third", T0 + 2 * SLOT_MS + 1)  # appended to a log not loaded, not committed
    rig.park("new-slot", T0 + 5 * SLOT_MS)  # a log created after the commit
    rig.advance_to(T0 + 500)  # "first" and "second" are delivered
    report = rig.crash_and_reopen()
    assert any("cut" in n and slot_file_name(T0) in n for n in report.notes), report.notes
    assert any("removed the uncommitted" in n for n in report.notes), report.notes
    assert report.deliveries_recovered == 2
    assert report.scheduled == 1  # "far"; the replay finds "third" again
    for f in rig.timer.logs.logs.values():
        assert os.path.getsize(f.path) == f.size_bytes and f.records == 1
    rig.advance_to(T0 + 5 * SLOT_MS + 1_000)
    check_exactly_once(rig, {"first": T0 + 300, "second": T0 + 400, "far": T0 + 2 * SLOT_MS,
                             "third": T0 + 2 * SLOT_MS + 1, "new-slot": T0 + 5 * SLOT_MS})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_crashes_at_random_moments(tmp_path: Path, clock: ManualClock, seed: int) -> None:
    rng = random.Random(seed)
    rig = Rig(tmp_path / "store", clock, timerFlushIntervalMs=rng.choice([300, 1_000, 5_000]))
    dues = schedule(rig, rng, 60, 2 * SLOT_MS)
    for crash in range(3):
        target = clock.now_ms() + rng.randrange(SLOT_MS // 2)
        more = schedule(rig, rng, 10, 2 * SLOT_MS, prefix=f"c{crash}-")
        dues.update(more)
        rig.advance_to(target)
        clock.advance(rng.randrange(TICK_MS))
        rig.timer.replay_pending()  # a replay that may not be committed
        rig.crash_and_reopen()
    rig.advance_to(T0 + 3 * SLOT_MS)
    check_exactly_once(rig, dues)
    assert rig.timer.stats().scheduled == 0
    rig.close()


def test_a_damaged_progress_file_stops_the_start(rig: Rig) -> None:
    rig.park("m", T0 + 1_000)
    rig.step()
    rig.close()
    path = os.path.join(rig.config.root, "timer", "progress")
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "wb") as f:
        f.write(good[:10] + bytes([good[10] ^ 0xFF]) + good[11:])
    with pytest.raises(CorruptionError, match="progress file .* is damaged"):
        rig.open()
    rig.store.shutdown()
    with open(path, "wb") as f:  # put it back: the same files open again
        f.write(good)
    rig.open()
    rig.advance_to(T0 + 1_200)
    assert rig.delivered_keys() == ["m"]


def test_a_torn_dispatch_log_tail_is_cut(rig: Rig, clock: ManualClock) -> None:
    rig.park("a", T0 + 200)
    rig.park("b", T0 + 5_000)
    rig.advance_to(T0 + 1_500)  # "a" delivered and checkpointed
    rig.close()
    path = os.path.join(rig.config.root, "timer", "dispatch", slot_file_name(T0))
    with open(path, "ab") as f:
        f.write(b"SKTD\x00\x00")
    report = rig.open()
    assert any("torn tail of 6 bytes" in n for n in report.notes), report.notes
    rig.advance_to(T0 + 6_000)
    check_exactly_once(rig, {"a": T0 + 200, "b": T0 + 5_000})
