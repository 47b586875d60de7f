"""The offset a POP group has consumed up to in a queue (`PopState.lowest_unacked`, what every
ack commits): the lowest offset still in flight, orderly or not, else the cursor."""

from __future__ import annotations

from pathlib import Path

from skiff.broker.pop.state import InFlight, OrderBatch, PopState

KEY = ("G", "T", 0)


def entry() -> InFlight:
    return InFlight(0, 60_000, 0)


def test_the_consumed_offset_is_the_lowest_in_flight_else_the_cursor(tmp_path: Path):
    state = PopState(str(tmp_path))
    assert state.lowest_unacked(KEY) is None
    state.cursors[KEY] = 40
    assert state.lowest_unacked(KEY) == 40
    state.in_flight[KEY] = {12: entry(), 17: entry()}
    assert state.lowest_unacked(KEY) == 12
    batch = state.batches[KEY] = OrderBatch("", 40)
    batch.pending[9] = entry()
    assert state.lowest_unacked(KEY) == 9
    del state.in_flight[KEY]
    assert state.lowest_unacked(KEY) == 9
    batch.pending.clear()
    assert state.lowest_unacked(KEY) == 40
    state.in_flight[KEY] = {}
    assert state.lowest_unacked(KEY) == 40
