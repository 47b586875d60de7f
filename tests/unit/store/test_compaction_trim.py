"""`Compaction.trim`: a compacted queue's records below an offset leave the disk (a tiered
topic's, once they are in the tier): the queue then starts there, a pull below it is
OFFSET_TOO_SMALL (what sends a broker's pull to its tier), the start survives a restart and
later compactions, and a crash during the trim leaves the old or the new segment."""

from __future__ import annotations

import pytest

from skiff.store import GetStatus

from .conftest import StoreFactory
from .test_compaction import compact, put, view


class Crash(Exception):
    pass


def keyed(store, first: int, n: int, keys: int) -> None:
    for i in range(first, first + n):
        assert put(store, f"k{i % keys}", f"v{i}".encode()) == i


def test_a_trimmed_queue_starts_at_the_trim_point_through_restarts_and_compactions(open_store: StoreFactory) -> None:
    store = open_store()
    keyed(store, 0, 20, 5)  # compacted: 15..19
    compact(store)
    assert store.compaction.trim("T", 0, 17) == 2
    assert store.get_min_offset("T", 0) == 17
    low = store.get_messages("T", 0, 3, 8)
    assert (low.status, low.next_begin_offset, low.min_offset) == (GetStatus.OFFSET_TOO_SMALL, 17, 17)
    assert view(store) == [(i, f"k{i % 5}", f"v{i}".encode()) for i in (17, 18, 19)]
    assert store.compaction.trim("T", 0, 10) == 0  # below the start: nothing to do
    assert store.compaction.trim("T", 0, 99) == 3  # never past the cleaned point (20)
    assert store.get_min_offset("T", 0) == 20
    keyed(store, 20, 10, 5)
    compact(store)  # the next compaction keeps the start
    assert store.get_min_offset("T", 0) == 20
    assert view(store) == [(i, f"k{i % 5}", f"v{i}".encode()) for i in range(25, 30)]
    store.shutdown()
    again = open_store()
    assert again.get_min_offset("T", 0) == 20
    assert view(again) == [(i, f"k{i % 5}", f"v{i}".encode()) for i in range(25, 30)]


@pytest.mark.parametrize("step", ["data-synced", "index-synced", "manifest-tmp-written", "manifest-switched"])
def test_a_crash_during_a_trim_leaves_the_old_or_the_new_segment(open_store: StoreFactory, step: str) -> None:
    store = open_store()
    keyed(store, 0, 20, 5)
    compact(store)

    def crash(at: str) -> None:
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        store.compaction.trim("T", 0, 18, crash)
    image = open_store.crash_image(store)
    reopened = open_store(root=image)
    trimmed = step == "manifest-switched"
    assert reopened.get_min_offset("T", 0) == (18 if trimmed else 0)  # the first compaction's start: 0
    assert view(reopened) == [(i, f"k{i % 5}", f"v{i}".encode()) for i in range(18 if trimmed else 15, 20)]
