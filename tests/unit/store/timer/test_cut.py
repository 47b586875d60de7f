"""A stopped timer's store cut below its checkpoint and written again, as a demoted master's
is (`ReplicasManager._follow`): the next start must neither hang nor skip what was written
after the cut. The chaos runs hung here: recovery walked the CommitLog from the old
checkpoint, which lay inside a record of zeros, and a zero length never advanced."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from skiff.common.clock import ManualClock
from skiff.common.names import SCHEDULE_TOPIC
from skiff.store.timer.cut import CHECKPOINT_FILE, PROGRESS_FILE, after_cut, timer_root
from skiff.store.timer.formats import decode_checkpoint, decode_progress, read_small_file
from tests.unit.store.conftest import message
from tests.unit.store.timer.conftest import SLOT_MS, T0, Rig

RECOVERY_BOUND_S = 60.0
"""A recovery that has not returned by then is the hang (it reads a few hundred KiB)."""


def checkpoint_of(rig: Rig) -> int:
    path = os.path.join(timer_root(str(rig.root)), CHECKPOINT_FILE)
    raw = read_small_file(path)
    assert raw is not None
    return decode_checkpoint(raw, path)


def cut_and_write_zeros(rig: Rig) -> tuple[int, int]:
    """Stop the timer (checkpoint at the CommitLog's end), cut the store back to the start of
    a record below it, and write a record of zeros over the old checkpoint, as a successor's
    records would be replicated there. Returns (cut, old checkpoint)."""
    first = rig.store.put_message(message(0, topic="Plain", body=b"x" * 100))
    for i in range(1, 20):
        assert rig.store.put_message(message(i, topic="Plain", body=b"y" * 100)).ok
    rig.timer.stop()
    old = checkpoint_of(rig)
    assert old == rig.store.max_physical_offset
    cut = first.physical_offset
    assert rig.store.truncate(cut) > 0
    assert rig.store.put_message(message(99, topic="Plain", body=bytes(8192))).ok
    assert rig.store.max_physical_offset > old
    return cut, old


def recover_within_bound(rig: Rig) -> None:
    done = threading.Event()

    def recover() -> None:
        rig.timer = type(rig.timer)(rig.store, rig.config, clock=rig.clock)
        rig.report = rig.timer.recover()
        done.set()

    threading.Thread(target=recover, daemon=True).start()
    assert done.wait(RECOVERY_BOUND_S), "timer recovery did not return: it walks the CommitLog from inside a record"


def test_a_checkpoint_left_inside_a_record_is_read_past_not_looped_on(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock)
    rig.park("early", T0 + 500)
    rig.park("late", T0 + 2 * SLOT_MS)
    rig.advance_to(T0 + 1_000)
    assert rig.delivered_keys() == ["early"]
    cut_and_write_zeros(rig)  # a store cut before the cut lowered the timer's files
    recover_within_bound(rig)
    rig.advance_to(T0 + 2 * SLOT_MS + 1_000)
    assert rig.delivered_keys() == ["early", "late"]
    rig.close()


def test_after_cut_lowers_the_checkpoint_and_the_replay_progress(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock)
    rig.park("before", T0 + 2 * SLOT_MS, schedule_queue=18)
    rig.step()
    first = rig.store.put_message(message(0, topic="Plain"))
    rig.park("cut-away", T0 + 2 * SLOT_MS, schedule_queue=18)
    rig.step()
    rig.timer.stop()  # commits the replay progress past "cut-away" and checkpoints the end
    root = timer_root(str(rig.root))
    progress_path = os.path.join(root, PROGRESS_FILE)

    def replayed() -> int:
        raw = read_small_file(progress_path)
        assert raw is not None
        return decode_progress(raw, progress_path).queues[18]

    assert replayed() == 2 and checkpoint_of(rig) > first.physical_offset
    rig.store.truncate(first.physical_offset)
    assert rig.store.get_max_offset(SCHEDULE_TOPIC, 18) == 1

    notes = after_cut(rig.store, first.physical_offset, clock.now_ms())
    assert len(notes) == 2, notes
    assert checkpoint_of(rig) == first.physical_offset and replayed() == 1
    assert after_cut(rig.store, first.physical_offset, clock.now_ms()) == []  # lowered once

    rig.park("successor", T0 + 2 * SLOT_MS, schedule_queue=18)  # the successor's record at the cut's place
    recover_within_bound(rig)
    rig.advance_to(T0 + 2 * SLOT_MS + 1_000)
    # "cut-away" was replayed into a schedule log before the cut, and the log keeps its own
    # copy of the message: it may still be delivered, once. It was never acknowledged (the
    # successor never had it), so that is at-least-once for an unanswered send, not a loss.
    assert sorted(set(rig.delivered_keys()) - {"cut-away"}) == ["before", "successor"]
    assert len(rig.delivered_keys()) == len(set(rig.delivered_keys())), "delivered twice"
    rig.close()
