"""The classic HA stream codec: reports, frames, and records reassembled across frames."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.common.errors import DecodeError
from skiff.protocol.ha import FrameReader, RecordAssembler, ReportReader, encode_frame_head, encode_report


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
def test_frames_round_trip_through_any_cuts(frames, cut):
    stream = b"".join(encode_frame_head(o, len(b)) + b for o, b in frames)
    reader = FrameReader()
    got = [f for i in range(0, len(stream), cut) for f in reader.feed(stream[i : i + cut])]
    assert [(f.offset, f.body) for f in got] == frames


def test_a_bad_frame_size_is_refused():
    with pytest.raises(DecodeError, match="bad HA frame"):
        list(FrameReader().feed(struct.pack(">qi", 0, -5)))


def _units(sizes, file_size):
    """Records of ``sizes`` (TOTALSIZE first) laid out like a CommitLog with blanks at file ends."""
    out = bytearray()
    for size in sizes:
        room = file_size - len(out) % file_size
        if size != room and size + 8 > room:
            out += struct.pack(">ii", room, -875286124) + bytes(room - 8)
        out += struct.pack(">i", size) + bytes([size % 251]) * (size - 4)
    return bytes(out)


@given(st.lists(st.integers(12, 200), min_size=1, max_size=40), st.integers(1, 300))
def test_only_whole_records_come_out_however_frames_cut_them(sizes, cut):
    data = _units(sizes, 512)
    asm = RecordAssembler(512, 0)
    out = bytearray()
    for i in range(0, len(data), cut):
        start, whole = asm.feed(i, data[i : i + cut])
        assert start == len(out)
        out += whole
        assert data.startswith(out)
    assert bytes(out) == data and asm.end == len(data)


def test_a_frame_that_does_not_continue_is_refused():
    asm = RecordAssembler(512, 1024)
    with pytest.raises(DecodeError, match="expects 1024"):
        asm.feed(1000, b"")
    with pytest.raises(DecodeError, match="does not fit"):
        asm.feed(1024, struct.pack(">i", 600) + bytes(4))
