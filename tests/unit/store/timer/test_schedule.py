"""Scheduling and delivering with a ManualClock: slots, ticks, due and past-due messages,
far-future messages, what a delivered message holds, slot roll-over and expiry."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from skiff.common.clock import ManualClock
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import Prop
from skiff.common.record import read_head, unpack_host
from skiff.common.sysflag import MessageSysFlag
from skiff.store.timer import CancelStatus
from skiff.store.timer.formats import slot_file_name
from tests.unit.store.conftest import BORN_HOST
from tests.unit.store.timer.conftest import (
    LOOKAHEAD_MS,
    REAL,
    SLOT_MS,
    T0,
    TICK_MS,
    Rig,
    parked,
)

TWO_YEARS_MS = 2 * 365 * 86_400_000


def schedule_files(rig: Rig) -> list[str]:
    return sorted(os.listdir(os.path.join(rig.config.root, "timer", "schedule")))


def dispatch_files(rig: Rig) -> list[str]:
    return sorted(os.listdir(os.path.join(rig.config.root, "timer", "dispatch")))


def test_each_message_goes_to_the_schedule_log_of_its_slot(rig: Rig) -> None:
    rig.park("now-ish", T0 + 1_000)
    rig.park("same-slot", T0 + SLOT_MS - 1)
    rig.park("next-slot", T0 + SLOT_MS)
    rig.park("far", T0 + 5 * SLOT_MS + 7)
    assert rig.timer.replay_pending() == 4
    counts = {c.slot_start_ms: (c.scheduled, c.loaded) for c in rig.timer.scheduled_per_slot()}
    assert counts == {T0: (2, True), T0 + SLOT_MS: (1, False), T0 + 5 * SLOT_MS: (1, False)}
    assert schedule_files(rig) == [slot_file_name(s) for s in (T0, T0 + SLOT_MS, T0 + 5 * SLOT_MS)]
    stats = rig.timer.stats()
    assert (stats.scheduled, stats.in_wheel, stats.slots_on_disk, stats.slots_loaded, stats.replay_lag) == (4, 2, 3, 1, 0)


def test_a_message_is_delivered_at_the_first_tick_boundary_after_its_due_time(rig: Rig, clock: ManualClock) -> None:
    due = T0 + 1_050
    rig.park("m", due)
    rig.step()
    clock.advance(1_050)  # exactly due, but its tick [1000, 1100) has not ended
    rig.step()
    assert rig.delivered() == []
    clock.advance(TICK_MS - 51)
    rig.step()
    assert rig.delivered() == []
    clock.advance(1)
    rig.step()
    [msg] = rig.delivered()
    assert msg.store_timestamp == T0 + 1_100 >= due
    assert rig.timer.stats().lateness_max_ms == 50


def test_a_past_due_message_is_delivered_at_the_next_tick(rig: Rig, clock: ManualClock) -> None:
    clock.advance(5_000)
    rig.park("late", T0 + 1_000)  # due 4 s ago when it was replayed (a lagging replay)
    rig.step()
    assert rig.delivered_keys() == ["late"]
    assert rig.timer.stats().lateness_p50_ms == 4_000


def test_a_message_due_years_ahead_is_only_written_to_disk(rig: Rig) -> None:
    due = T0 + TWO_YEARS_MS
    rig.park("far", due)
    rig.timer.replay_pending()
    stats = rig.timer.stats()
    assert (stats.scheduled, stats.in_wheel, stats.slots_loaded) == (1, 0, 0)
    slot = due - due % SLOT_MS
    [count] = rig.timer.scheduled_per_slot()
    assert (count.slot_start_ms, count.scheduled, count.loaded) == (slot, 1, False)
    log = rig.timer.logs.logs[slot]
    assert log.records == 1 and os.path.getsize(log.path) == log.size_bytes > 0


def test_a_delivered_message_is_the_one_sent_without_its_scheduling_properties(rig: Rig) -> None:
    body = zlib.compress(b"x" * 5000)
    rig.park("full", T0 + 500, topic=REAL, queue_id=3, body=body, sys_flag=int(MessageSysFlag.COMPRESSED),
             extra={Prop.DELAY: "2", Prop.RECONSUME_TIME: "1"}, reconsume_times=2)
    rig.advance_to(T0 + 600)
    [msg] = rig.delivered()
    assert (msg.topic, msg.queue_id, msg.flag, msg.body) == (REAL, 3, 3, b"x" * 5000)
    assert msg.sys_flag & MessageSysFlag.COMPRESSED
    assert (msg.born_timestamp, msg.born_host, msg.reconsume_times) == (1_234, unpack_host(BORN_HOST), 2)
    [parked_record] = rig.store.query_by_key(SCHEDULE_TOPIC, "full", 1, 0, 2**62)
    assert msg.properties == {
        Prop.UNIQ_KEY: "full", Prop.KEYS: "k-full", Prop.TAGS: "TagA", "color": "red", Prop.RECONSUME_TIME: "1",
        Prop.TIMER_ID: f"{T0}:{read_head(parked_record).physical_offset}",
    }
    assert rig.store.query_by_key(REAL, "k-full", 4, 0, 2**62) and rig.store.query_by_key(REAL, "full", 4, 0, 2**62)


def test_messages_of_one_queue_come_in_due_order_and_equal_times_in_send_order(rig: Rig) -> None:
    dues = [T0 + 900, T0 + 300, T0 + 300, T0 + 301, T0 + 2_000, T0 + 300]
    for i, due in enumerate(dues):
        rig.park(f"m{i}", due)
    rig.advance_to(T0 + 2_100)
    assert [m.properties[Prop.UNIQ_KEY] for m in rig.delivered()] == ["m1", "m2", "m5", "m3", "m0", "m4"]


def test_slots_roll_over_load_ahead_and_expire(tmp_path: Path, clock: ManualClock) -> None:
    rig = Rig(tmp_path / "store", clock, timerFlushIntervalMs=3_600_000)  # checkpoints only when asked
    rig.park("a", T0 + SLOT_MS - 200)
    rig.park("b", T0 + SLOT_MS + 200)
    rig.step()
    assert [(c.slot_start_ms, c.loaded) for c in rig.timer.scheduled_per_slot()] == [(T0, True), (T0 + SLOT_MS, False)]
    clock.advance(SLOT_MS - LOOKAHEAD_MS)  # the next slot comes within the lookahead
    rig.step()
    assert [c.loaded for c in rig.timer.scheduled_per_slot()] == [True, True]
    assert rig.timer.stats().in_wheel == 2
    rig.advance_to(T0 + SLOT_MS + 300)
    assert rig.delivered_keys() == ["a", "b"]
    # slot T0 is past and finished, but its delivery is not durable before a checkpoint
    assert schedule_files(rig) == [slot_file_name(T0), slot_file_name(T0 + SLOT_MS)]
    rig.timer.deliverer.checkpoint()
    rig.step()
    assert schedule_files(rig) == dispatch_files(rig) == [slot_file_name(T0 + SLOT_MS)]
    rig.advance_to(T0 + 2 * SLOT_MS)
    rig.timer.deliverer.checkpoint()
    rig.step()
    assert schedule_files(rig) == dispatch_files(rig) == []
    assert rig.timer.stats().slots_on_disk == 0
    rig.close()


def test_a_late_message_for_a_retired_slot_brings_it_back(rig: Rig, clock: ManualClock) -> None:
    rig.park("early", T0 + 100)
    rig.advance_to(T0 + SLOT_MS + 2_000)
    assert schedule_files(rig) == []
    rig.park("late", T0 + 200)  # due in the retired slot (a replay that lagged)
    rig.advance_to(clock.now_ms() + 2 * TICK_MS)
    assert rig.delivered_keys() == ["early", "late"]


def test_a_parked_record_without_a_real_topic_is_skipped_and_counted(rig: Rig) -> None:
    rig.park("nowhere", T0 + 100, extra={Prop.REAL_TOPIC: ""})
    rig.park("fine", T0 + 100)
    rig.advance_to(T0 + 300)
    assert rig.delivered_keys() == ["fine"]
    stats = rig.timer.stats()
    assert (stats.unroutable, stats.delivered, stats.scheduled) == (1, 1, 0)


def test_a_missing_due_time_means_due_at_once(rig: Rig) -> None:
    rig.park("no-time", T0 + 50_000, extra={Prop.TIMER_OUT_MS: "soon"})
    rig.advance_to(T0 + 200)
    assert rig.delivered_keys() == ["no-time"]


def test_a_message_the_store_refuses_for_good_is_dropped_once(rig: Rig) -> None:
    rig.park("bad", T0 + 100, topic="no such topic")  # a space: the store refuses the name
    rig.park("good", T0 + 100)
    rig.advance_to(T0 + 1_300)
    stats = rig.timer.stats()
    assert (stats.delivered, stats.dropped, stats.scheduled) == (1, 1, 0)
    rig.close()
    rig.open()
    rig.advance_to(T0 + 3_000)
    assert rig.timer.stats().dropped == 0 and rig.delivered_keys() == ["good"]


def test_a_burst_due_in_one_tick_is_delivered_in_batches(rig: Rig) -> None:
    for i in range(5_000):
        rig.store.put_message(parked(f"u{i}", T0 + 500, queue_id=i % 4))
    rig.advance_to(T0 + 600)
    assert rig.delivered_keys() == sorted(f"u{i}" for i in range(5_000))
    assert rig.timer.stats().in_wheel == 0


def test_messages_built_ahead_follow_cancels_and_late_additions(rig: Rig) -> None:
    for uniq in ("a", "b", "c"):
        rig.park(uniq, T0 + 3_000)
    rig.step()  # all three are built ahead
    assert sum(len(ready) for ready, _ in rig.timer.deliverer._prepared.values()) == 3
    assert rig.timer.cancel("b").status is CancelStatus.CANCELLED
    rig.park("d", T0 + 3_000)  # the same tick grows after it was built
    rig.advance_to(T0 + 3_100)
    assert rig.delivered_keys() == ["a", "c", "d"]
    assert all(tick > (T0 + 3_000) // TICK_MS for tick in rig.timer.deliverer._prepared)  # passed ticks forgotten
