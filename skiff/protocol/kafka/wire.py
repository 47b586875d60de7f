"""Kafka's primitive types: fixed-width big-endian integers, the int16/int32-length
strings, bytes and arrays of non-flexible versions, their compact (unsigned varint
N+1) forms of flexible versions, zig-zag varints inside records, tagged-field sections.

A `Reader` raises `DecodeError` on any read past its end, so a truncated or lying
frame is a clear error at the field that overran, never an IndexError.
"""

from __future__ import annotations

import struct

from skiff.common.errors import DecodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class Reader:
    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise DecodeError(f"{n} bytes asked at {self.pos}, {self.end - self.pos} left")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > self.end:
            raise DecodeError(f"a {s.size}-byte integer at {self.pos} runs past the end ({self.end})")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(v)

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def boolean(self) -> bool:
        return self.int8() != 0

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= self.end:
                raise DecodeError(f"a varint runs past the end ({self.end})")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise DecodeError(f"a varint at {self.pos} is longer than 10 bytes")

    def varint(self) -> int:
        """A zig-zag varint or varlong (records)."""
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def string(self, compact: bool = False, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if compact else self.int16()
        if n < 0:
            if not nullable:
                raise DecodeError(f"a null string at {self.pos} where one is required")
            return None
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"a string at {self.pos - n} is not UTF-8: {exc}") from None

    def bytes_(self, compact: bool = False, nullable: bool = False) -> bytes | None:
        n = self.uvarint() - 1 if compact else self.int32()
        if n < 0:
            if not nullable:
                raise DecodeError(f"null bytes at {self.pos} where they are required")
            return None
        return self.take(n)

    def count(self, compact: bool = False) -> int:
        """An array's element count; -1 is null."""
        n = self.uvarint() - 1 if compact else self.int32()
        if n > self.remaining:  # every element takes at least one byte
            raise DecodeError(f"an array of {n} elements at {self.pos} cannot fit in {self.remaining} bytes")
        return n

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


BY_REFERENCE_MIN_BYTES = 16 * 1024
"""A bytes field this long is kept as its own part of a parts `Writer`'s output instead of copied
into its buffer: a Fetch answer's record batches (up to a MiB each at librdkafka's defaults) go to
the socket as the batch kernel made them, not copied twice more (into the buffer, then out of it)."""

Buffer = bytes | bytearray | memoryview


class Writer:
    """Fields written into ``buf``; with ``parts``, a long bytes field (`BY_REFERENCE_MIN_BYTES`)
    is not copied: ``parts`` gets the buffer so far and the field, and ``buf`` starts anew
    (`output`: the whole, in order)."""

    __slots__ = ("buf", "parts")

    def __init__(self, parts: bool = False) -> None:
        self.buf = bytearray()
        self.parts: list[Buffer] | None = [] if parts else None

    def output(self) -> list[Buffer]:
        """Everything written, in order: ``buf`` alone unless long fields were kept apart."""
        return [*self.parts, self.buf] if self.parts else [self.buf]

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uvarint(self, v: int) -> None:
        self.buf += uvarint_bytes(v)

    def varint(self, v: int) -> None:
        self.buf += uvarint_bytes((v << 1) ^ (v >> 63))

    def string(self, v: str | None, compact: bool = False) -> None:
        if v is None:
            self.uvarint(0) if compact else self.int16(-1)
            return
        data = v.encode("utf-8")
        self.uvarint(len(data) + 1) if compact else self.int16(len(data))
        self.buf += data

    def bytes_(self, v: bytes | bytearray | memoryview | None, compact: bool = False) -> None:
        if v is None:
            self.uvarint(0) if compact else self.int32(-1)
            return
        self.uvarint(len(v) + 1) if compact else self.int32(len(v))
        if self.parts is not None and len(v) >= BY_REFERENCE_MIN_BYTES:
            self.parts += (self.buf, v)
            self.buf = bytearray()
        else:
            self.buf += v

    def count(self, n: int | None, compact: bool = False) -> None:
        if n is None:
            self.uvarint(0) if compact else self.int32(-1)
        else:
            self.uvarint(n + 1) if compact else self.int32(n)

    def empty_tags(self) -> None:
        self.buf.append(0)


def uvarint_bytes(v: int) -> bytes:
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_SMALL_VARINTS = [uvarint_bytes(zz) for zz in range(1 << 14)]
"""The encodings of zig-zag values below 2**14 (two bytes or less): a record's lengths and
deltas are almost always there, and a list index is a tenth of the loop's cost."""


def varint_bytes(v: int) -> bytes:
    """Zig-zag varint (records' lengths and deltas)."""
    zz = (v << 1) ^ (v >> 63)
    return _SMALL_VARINTS[zz] if 0 <= zz < 16384 else uvarint_bytes(zz)
