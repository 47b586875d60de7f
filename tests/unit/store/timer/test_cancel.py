"""Cancelling scheduled messages by UNIQ_KEY or offsetMsgId, in every state a message can be in."""

from __future__ import annotations

from pathlib import Path

from skiff.common.clock import ManualClock
from skiff.store.timer import CancelStatus
from tests.unit.store.conftest import message
from tests.unit.store.timer.conftest import SLOT_MS, T0, Rig


def test_cancel_a_message_waiting_in_the_wheel(rig: Rig) -> None:
    rig.park("a", T0 + 1_000)
    rig.park("b", T0 + 1_000)
    rig.step()
    result = rig.timer.cancel("a")
    assert result.status is CancelStatus.CANCELLED
    [outcome] = result.outcomes
    assert (outcome.slot_start_ms, outcome.due_ms) == (T0, T0 + 1_000)
    assert [c.scheduled for c in rig.timer.scheduled_per_slot()] == [1]
    assert rig.timer.cancel("a").status is CancelStatus.ALREADY_CANCELLED
    rig.advance_to(T0 + 2_000)
    assert rig.delivered_keys() == ["b"]
    assert rig.timer.cancel("b").status is CancelStatus.ALREADY_DELIVERED
    stats = rig.timer.stats()
    assert (stats.cancelled, stats.delivered, stats.scheduled) == (1, 1, 0)


def test_cancel_by_offset_msg_id_in_a_slot_not_loaded_survives_a_restart(rig: Rig) -> None:
    due = T0 + 3 * SLOT_MS + 500
    put = rig.park("far", due)
    rig.park("near", T0 + 3 * SLOT_MS + 600)
    rig.step()
    [offset_msg_id] = put.offset_msg_ids
    result = rig.timer.cancel(offset_msg_id)
    assert [(o.status, o.slot_start_ms, o.timer_id) for o in result.outcomes] == [
        (CancelStatus.CANCELLED, T0 + 3 * SLOT_MS, put.physical_offset)]
    assert [(c.scheduled, c.loaded) for c in rig.timer.scheduled_per_slot()] == [(1, False)]
    rig.close()
    rig.open()
    assert rig.timer.cancel(offset_msg_id).status is CancelStatus.ALREADY_CANCELLED
    rig.advance_to(due + 1_000)
    assert rig.delivered_keys() == ["near"]


def test_cancel_before_the_replay_reaches_the_message(rig: Rig) -> None:
    rig.park("loaded", T0 + 5_000)
    rig.step()  # slot T0 is loaded now
    rig.park("x", T0 + 1_000)
    rig.park("y", T0 + SLOT_MS + 1_000)  # a slot that does not exist yet
    assert rig.timer.cancel("x").status is CancelStatus.CANCELLED
    assert rig.timer.cancel("y").status is CancelStatus.CANCELLED
    rig.advance_to(T0 + SLOT_MS + 2_000)
    assert rig.delivered_keys() == ["loaded"]
    assert rig.timer.stats().scheduled == 0


def test_a_uniq_key_cancels_every_parked_copy(rig: Rig) -> None:
    rig.park("same", T0 + 1_000)
    rig.park("same", T0 + 2 * SLOT_MS)  # a retry of the same message
    rig.step()
    result = rig.timer.cancel("same")
    assert [o.status for o in result.outcomes] == [CancelStatus.CANCELLED] * 2
    assert len({o.timer_id for o in result.outcomes}) == 2


def test_ids_that_name_no_parked_message_are_not_found(rig: Rig) -> None:
    plain = rig.store.put_message(message(1, topic="Plain", uniq="plain-1"))
    rig.park("parked", T0 + 1_000)
    rig.step()
    for msg_id in ("nothing-like-it", plain.offset_msg_ids[0], "plain-1", "0" * 32):
        result = rig.timer.cancel(msg_id)
        assert (result.status, result.outcomes) == (CancelStatus.NOT_FOUND, ()), msg_id
    assert rig.timer.stats().scheduled == 1


def test_cancel_after_retention_removed_the_parked_record(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock, mappedFileSizeCommitLog=4096, fileReservedTime=0)
    put = rig.park("old", T0 + 2 * SLOT_MS)
    rig.step()
    for i in range(40):  # fill newer CommitLog files so the first one expires
        assert rig.store.put_message(message(i, topic="Filler", body=b"z" * 200)).ok
    rig.store.flush()
    assert rig.store.run_retention(manual=True).commitlog_files_deleted >= 1
    assert rig.store.read_record(put.physical_offset) is None
    assert rig.timer.cancel("old").status is CancelStatus.CANCELLED
    assert rig.timer.cancel(put.offset_msg_ids[0]).status is CancelStatus.ALREADY_CANCELLED
    rig.advance_to(T0 + 2 * SLOT_MS + 1_000)
    assert rig.delivered_keys() == []
    rig.close()
