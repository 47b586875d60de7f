"""A tiered file read a row group at a time: the byte ranges recorded at upload, and a row group
decoded from its range and the footer alone.

A first read of a tiered offset needs one row group (~4 MB of a file up to 64 MiB). When the
manifest's segment records each row group's byte range (its column chunks, which pyarrow writes
back to back: from the first chunk's dictionary page to the last chunk's end) and the footer's
(the file's tail: the Thrift metadata, its 4-byte length, ``PAR1``), each with its SHA-256, a
reader fetches those two ranges, checks each against the manifest, and decodes the row group
from them: no whole-file fetch, no whole-file hash. A file whose chunks are not contiguous (a
writer other than `skiff.tier.tier.parquet_bytes`) gets no ranges and is read whole, as files
uploaded before ranges existed are.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from skiff.tier.backends import TierError
from skiff.tier.manifest import ByteRange, Segment

_TAIL = struct.Struct("<I4s")
"""A Parquet file's last 8 bytes: the footer's length (little-endian uint32) and ``PAR1``."""
_MAGIC = b"PAR1"
_Bytes = TypeVar("_Bytes", bytes, memoryview)


def file_ranges(data: bytes) -> tuple[tuple[ByteRange, ...], ByteRange | None]:
    """The byte range and SHA-256 of each row group of the Parquet file ``data`` and of its footer;
    ``((), None)`` when some row group's column chunks are not one contiguous run (then the file
    is only ever read whole)."""
    length, magic = _TAIL.unpack_from(data, len(data) - _TAIL.size)
    if magic != _MAGIC:
        raise ValueError("not a Parquet file: its last 4 bytes are not PAR1")
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    footer_start = len(data) - _TAIL.size - length
    spans = [_row_group_span(meta.row_group(i)) for i in range(meta.num_row_groups)]
    ends = [len(_MAGIC)] + [span[1] for span in spans if span is not None]
    if not spans or None in spans or any(span is None or span[0] < end for span, end in zip(spans, ends)) or \
            ends[-1] > footer_start:
        return (), None  # chunks not back to back, row groups out of order, or a row group without rows
    return tuple(_range(data, *span) for span in spans if span is not None), _range(data, footer_start, len(data))


def _row_group_span(rg: Any) -> tuple[int, int] | None:
    """The one run of bytes a row group's column chunks fill, dictionary pages included, or None
    when there is a gap or an overlap between them."""
    chunks = []
    if not rg.num_rows:
        return None  # pyarrow writes its chunks at offset 0: nothing to fetch alone
    for j in range(rg.num_columns):
        c = rg.column(j)
        start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
        chunks.append((start, start + c.total_compressed_size))
    chunks.sort()
    if not chunks or any(a[1] != b[0] for a, b in zip(chunks, chunks[1:])):
        return None
    return chunks[0][0], chunks[-1][1]


def _range(data: bytes, start: int, end: int) -> ByteRange:
    return ByteRange(start, end - start, hashlib.sha256(memoryview(data)[start:end]).hexdigest())


def checked_range(seg: Segment, what: str, rng: ByteRange, data: _Bytes) -> _Bytes:
    """``data`` if it is the range ``rng`` of ``seg``'s file (``what``: "row group 3", "footer"),
    else `TierError`: the same rule as the whole file's checksum, per range."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != rng.sha256 or len(data) != rng.length:
        raise TierError(f"tier file {seg.file}, {what} (bytes {rng.start}+{rng.length}): checksum {digest[:16]}… "
                        f"({len(data)} bytes) is not the manifest's {rng.sha256[:16]}…: the object is damaged or "
                        f"was replaced")
    return data


def footer_file(footer: bytes) -> pq.ParquetFile:
    """A checked footer (the file's tail) opened: its metadata, row groups and statistics, no data."""
    return pq.ParquetFile(pa.BufferReader(_MAGIC + footer))


class _Ranges:
    """A read-only file of ``size`` bytes of which only some ranges are known: what
    `pa.PythonFile` needs to let pyarrow read one row group. Reading outside them is a bug."""

    def __init__(self, size: int, parts: list[tuple[int, bytes]]) -> None:
        self.size, self.parts, self.pos, self.closed = size, parts, 0, False

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else self.size + pos
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.size, self.pos + n)
        for start, data in self.parts:
            if start <= self.pos and end <= start + len(data):
                out = data[self.pos - start:end - start]
                self.pos = end
                return out
        raise TierError(f"bytes {self.pos}..{end} of a tier file were read that were not fetched")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def ranged_file(meta: pq.FileMetaData, size_bytes: int, parts: list[tuple[int, bytes]]) -> pq.ParquetFile:
    """A file of ``size_bytes`` with metadata ``meta`` of which only ``parts`` (each a start and
    the checked bytes from there) were fetched: the row groups within them can be read from it."""
    return pq.ParquetFile(pa.PythonFile(_Ranges(size_bytes, parts), mode="r"), metadata=meta)


def decode_row_group(meta: pq.FileMetaData, size_bytes: int, index: int, rng: ByteRange, data: bytes) -> pa.Table:
    """Row group ``index`` of a file of ``size_bytes`` with metadata ``meta``, from its range's
    bytes ``data`` only (checked before)."""
    return ranged_file(meta, size_bytes, [(rng.start, data)]).read_row_group(index)
