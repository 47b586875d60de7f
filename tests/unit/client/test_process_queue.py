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
