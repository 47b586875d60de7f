"""A manifest's lookups of a queue's segments (sorted once per manifest, found by bisection)
answer as the plain definitions do: queues of files with gaps between them (a compacted
topic's), in any order in the manifest; a manifest made from another sorts its own."""

from __future__ import annotations

import pickle
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from skiff.tier.manifest import Manifest, Segment


def _segment(queue_id: int, first: int, last: int) -> Segment:
    return Segment(queue_id, first, last, 0, 0, f"T/b/{queue_id}/{first:020d}-{last:020d}.parquet", last - first + 1,
                   1, "0" * 64)


@st.composite
def manifests(draw: st.DrawFn) -> Manifest:
    segs = []
    for q in range(draw(st.integers(0, 3))):
        offset = draw(st.integers(0, 5))
        for _ in range(draw(st.integers(0, 6))):
            offset += draw(st.integers(0, 4))  # a gap, or none
            length = draw(st.integers(1, 6))
            segs.append(_segment(q, offset, offset + length - 1))
            offset += length
    return Manifest("T", "b", tuple(draw(st.permutations(segs))))


def _queue(m: Manifest, q: int) -> list[Segment]:
    return sorted((s for s in m.segments if s.queue_id == q), key=lambda s: s.first_offset)


@settings(max_examples=200, deadline=None)
@given(m=manifests(), offset=st.integers(0, 60), span=st.integers(0, 20))
def test_lookups_answer_as_their_definitions(m: Manifest, offset: int, span: int) -> None:
    for q in range(4):
        segs = _queue(m, q)
        assert m.queue(q) == segs
        assert m.first_offset(q) == (segs[0].first_offset if segs else None)
        assert m.end_offset(q) == (segs[-1].last_offset + 1 if segs else 0)
        assert m.covering(q, offset) == next((s for s in segs if offset <= s.last_offset), None)
        assert m.overlapping(q, offset, offset + span) == [
            s for s in segs if s.last_offset >= offset and s.first_offset < offset + span]
    assert m.queue_ids() == sorted({s.queue_id for s in m.segments})


def test_a_manifest_made_from_another_sorts_its_own_segments() -> None:
    m = Manifest("T", "b", (_segment(0, 10, 19), _segment(0, 0, 9)))
    assert m.end_offset(0) == 20 and m.covering(0, 5) == _segment(0, 0, 9)
    shorter = replace(m, segments=(_segment(0, 0, 9),))
    assert shorter.end_offset(0) == 10 and shorter.covering(0, 15) is None
    longer = m.with_segment(_segment(0, 25, 29))
    assert longer.end_offset(0) == 30 and longer.covering(0, 21) == _segment(0, 25, 29)
    assert m.end_offset(0) == 20 and m == Manifest("T", "b", m.segments)  # the sorted cache is not compared
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m and copy.covering(0, 12) == _segment(0, 10, 19)
