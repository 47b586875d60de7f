"""The classic HA stream codec: reports and frames under any cuts of the stream."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.protocol.ha import FrameReader, ReportReader, encode_frame_head, encode_report


@given(st.lists(st.integers(0, 2**62), min_size=1), st.integers(1, 7))
def test_reports_collapse_into_the_newest_whole_one(offsets, cut):
    stream = b"".join(map(encode_report, offsets))
    reader = ReportReader()
    got = [r for r in (reader.feed(stream[i : i + cut]) for i in range(0, len(stream), cut)) if r is not None]
    assert got[-1] == offsets[-1]
    ends = [i + cut for i in range(0, len(stream), cut)]  # bytes seen after each feed
    expected = [offsets[min(e, len(stream)) // 8 - 1] for e in ends if min(e, len(stream)) // 8 > (e - cut) // 8]
    assert got == expected


def test_a_negative_report_is_refused():
    with pytest.raises(DecodeError, match="negative"):
        ReportReader().feed(encode_report(-1))


@given(st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=300)), max_size=20), st.integers(1, 50))
def test_frame_bodies_come_out_in_order_with_their_offsets_through_any_cuts(frames, cut):
    stream = b"".join(encode_frame_head(o, len(b)) + b for o, b in frames)
    reader = FrameReader()
    got = [(f.offset, bytes(f.body)) for i in range(0, len(stream), cut) for f in reader.feed(stream[i : i + cut])]
    assert [(o + i, b) for o, body in got for i, b in enumerate(body)] == \
        [(o + i, b) for o, body in frames for i, b in enumerate(body)]
    assert [o for o, body in got if not body] == [o for o, body in frames if not body]  # heartbeats


def test_a_bad_frame_size_is_refused():
    with pytest.raises(DecodeError, match="bad HA frame"):
        list(FrameReader().feed(struct.pack(">qi", 0, -5)))
