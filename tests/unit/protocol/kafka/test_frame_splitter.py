"""`FrameSplitter` cuts a connection's reads into frames: the same frames, in order, however
the stream is cut into reads (at every byte, in random reads, a frame larger than many
reads), and a size field out of range stops it after the frames before it."""

from __future__ import annotations

import random
import struct

import pytest

from skiff.protocol.kafka.frames import FrameSplitter, FrameTooLarge


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _fed(splitter: FrameSplitter, reads: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for r in reads:
        splitter.feed(r, out)
    return out


FRAMES = [b"a", bytes(range(256)) * 40, b"xyz" * 3, random.Random(7).randbytes(70_000), b"q"]


def test_every_cut_of_two_reads_gives_the_frames() -> None:
    data = _stream(FRAMES[:3] + FRAMES[4:])
    for cut in range(len(data) + 1):
        splitter = FrameSplitter(1 << 20)
        out = _fed(splitter, [data[:cut], data[cut:]])
        assert out == FRAMES[:3] + FRAMES[4:] and splitter.buffered == 0
        assert all(type(f) is bytes for f in out)


def test_random_reads_and_one_byte_reads_give_the_frames() -> None:
    rng = random.Random(25)
    data = _stream(FRAMES * 3)
    for _ in range(40):
        reads, pos = [], 0
        while pos < len(data):
            n = rng.choice([1, 2, 3, 5, rng.randrange(1, 300), rng.randrange(1, 90_000)])
            reads.append(data[pos:pos + n])
            pos += n
        assert _fed(FrameSplitter(1 << 20), reads) == FRAMES * 3
    assert _fed(FrameSplitter(1 << 20), [data[i:i + 1] for i in range(len(_stream(FRAMES[:3])))]) == FRAMES[:3]


def test_a_frame_larger_than_many_reads_is_held_until_whole() -> None:
    big = random.Random(3).randbytes(1 << 20)
    data = _stream([big, b"after"])
    splitter = FrameSplitter(2 << 20)
    out: list[bytes] = []
    held = len(data) - 10  # all but the big frame's last byte and the next frame
    for pos in range(0, held, 256 * 1024):
        splitter.feed(data[pos:min(pos + 256 * 1024, held)], out)
        assert out == [] and splitter.buffered == min(pos + 256 * 1024, held)
    splitter.feed(data[held:held + 3], out)  # its last byte, and half the next size field
    assert out == [big] and splitter.buffered == 2
    splitter.feed(data[held + 3:], out)
    assert out == [big, b"after"] and splitter.buffered == 0


def test_a_size_out_of_range_stops_after_the_frames_before_it() -> None:
    for bad in (0, -1, 101):
        for cut in (0, 3, 6, 7):
            data = _stream([b"ok"]) + struct.pack(">i", bad) + b"junk"
            splitter, out = FrameSplitter(100), []
            with pytest.raises(FrameTooLarge) as caught:
                splitter.feed(data[:cut], out)
                splitter.feed(data[cut:], out)
            assert out == [b"ok"] and caught.value.size == bad
