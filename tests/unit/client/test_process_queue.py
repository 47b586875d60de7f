"""ProcessQueue: in-flight bookkeeping, the commit offset, flow-control figures, orderly take/commit/restore."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.client._impl.process_queue import LOCK_VALID_MS, PULL_EXPIRED_MS, ProcessQueue
from skiff.common.clock import ManualClock
from skiff.common.stored_message import StoredMessage


def msg(offset: int, size: int = 10) -> StoredMessage:
    return StoredMessage("T", b"x" * size, {}, queue_offset=offset)


def test_commit_offset_is_smallest_in_flight() -> None:
    pq = ProcessQueue()
    batch = [msg(o) for o in range(10, 15)]
    pq.add(batch)
    assert (pq.count, pq.size_bytes, pq.max_offset, pq.span) == (5, 50, 14, 4)
    assert pq.remove([batch[1], batch[3]]) == 10
    assert pq.remove([batch[0]]) == 12
    assert pq.remove([batch[2], batch[4]]) == 15
    assert (pq.count, pq.size_bytes, pq.empty) == (0, 0, True)
    assert pq.remove([batch[0]]) == -1, "nothing held: nothing to commit"


def test_duplicates_are_not_counted_twice() -> None:
    pq = ProcessQueue()
    pq.add([msg(1), msg(2)])
    pq.add([msg(2), msg(3)])
    assert pq.count == 3 and [m.queue_offset for m in pq.messages()] == [1, 2, 3]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=20), st.randoms())
def test_commit_offset_never_passes_an_unconsumed_message(gaps: list[int], rnd: random.Random) -> None:
    offsets = []
    at = 0
    for gap in gaps:  # filtered pulls leave gaps in the offsets
        at += gap
        offsets.append(at)
    pq = ProcessQueue()
    msgs = [msg(o) for o in offsets]
    pq.add(msgs)
    pending = set(offsets)
    order = msgs[:]
    rnd.shuffle(order)
    for m in order:
        committed = pq.remove([m])
        pending.discard(m.queue_offset)
        assert committed == (min(pending) if pending else offsets[-1] + 1)


def test_orderly_take_commit_restore() -> None:
    pq = ProcessQueue()
    pq.add([msg(o) for o in range(5)])
    first = pq.take(2)
    assert [m.queue_offset for m in first] == [0, 1]
    assert pq.min_offset() == 0 and pq.count == 5
    pq.restore([first[1]])  # 0 is kept in the consuming set (say it went to the DLQ), 1 comes back
    again = pq.take(2)
    assert [m.queue_offset for m in again] == [1, 2]
    assert pq.commit() == 3
    assert (pq.count, pq.min_offset()) == (2, 3)
    assert pq.commit() == -1
    pq.restore(pq.take(5))
    assert [m.queue_offset for m in pq.take(5)] == [3, 4]


def test_clear_forgets_everything() -> None:
    pq = ProcessQueue()
    pq.add([msg(1), msg(2)])
    pq.take(1)
    pq.clear()
    assert (pq.count, pq.size_bytes, pq.max_offset, pq.empty, pq.min_offset()) == (0, 0, -1, True, -1)


def test_lock_and_pull_expiry_follow_the_clock() -> None:
    clock = ManualClock()
    pq = ProcessQueue(clock)
    assert pq.lock_expired()
    pq.mark_locked(True)
    clock.advance(LOCK_VALID_MS)
    assert pq.locked and not pq.lock_expired()
    clock.advance(1)
    assert pq.lock_expired()
    assert not pq.pull_expired()
    clock.advance(PULL_EXPIRED_MS)
    assert pq.pull_expired()
    info = pq.info(commit_offset=3)
    assert info.locked and info.commit_offset == 3


def test_filtered_gaps_count_as_passed_once_nothing_waits() -> None:
    pq = ProcessQueue()
    batch = [msg(3), msg(7)]
    pq.add(batch)
    pq.pulled_to = 12  # the pull scanned up to 11; the others did not match the subscription
    assert pq.remove([batch[1]]) == 3
    assert pq.remove([batch[0]]) == 12
    pq.clear()
    assert pq.commit_offset() == 0


def test_runs_are_held_and_released_whole_with_the_same_figures_as_messages() -> None:
    pq, by_message = ProcessQueue(), ProcessQueue()
    first, second = [msg(o, 3) for o in (10, 12, 13)], [msg(o, 5) for o in (15, 16)]
    for batch in (first, second):
        pq.add_run(batch)
        by_message.add(batch)
    figures = lambda q: (q.count, q.size_bytes, q.max_offset, q.span, q.min_offset(), q.commit_offset(), q.empty)
    assert figures(pq) == figures(by_message) == (5, 19, 16, 6, 10, 10, False)
    assert pq.messages() == first + second
    assert pq.remove_run(first) == by_message.remove(first) == 15
    assert figures(pq) == figures(by_message)
    pq.pulled_to = by_message.pulled_to = 20  # the next pull filtered 17..19 out
    assert pq.remove_run(second) == by_message.remove(second) == 20
    assert figures(pq) == figures(by_message) and pq.empty


def test_a_run_released_out_of_order_leaves_the_older_one_as_the_commit_offset() -> None:
    pq = ProcessQueue()
    first, second = [msg(1), msg(2)], [msg(3), msg(4)]
    pq.add_run(first)
    pq.add_run(second)
    assert pq.remove_run(second) == 1 and pq.count == 2
    assert pq.remove_run(first) == 5 and pq.empty


def test_an_overlapping_batch_is_held_message_by_message_around_the_runs() -> None:
    pq = ProcessQueue()
    run = [msg(1), msg(2)]
    pq.add_run(run)
    overlap = [msg(2), msg(3)]
    pq.add_run(overlap)  # offset 2 is held by the run: only 3 is added
    assert pq.count == 3 and [m.queue_offset for m in pq.messages()] == [1, 2, 3]
    assert pq.remove_run(overlap) == 1, "not a run: removed as remove() does"
    assert pq.remove_run(run) == 4 and pq.empty
    pq.add_run([msg(7)])
    pq.clear()
    assert pq.empty and pq.count == 0 and pq.min_offset() == -1
