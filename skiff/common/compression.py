"""zlib bodies (sysFlag bit 0), inflated within a bound so a small frame cannot
expand into gigabytes (a zip bomb)."""

from __future__ import annotations

import zlib

from skiff.common.errors import DecodeError
from skiff.common.limits import FRAME_MAX_BYTES


def inflate(data: bytes | bytearray | memoryview, max_bytes: int = FRAME_MAX_BYTES) -> bytes:
    """Inflate one whole zlib stream of at most ``max_bytes`` output; `DecodeError` otherwise."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise DecodeError(f"the compressed body does not inflate: {exc}") from None
    if len(out) > max_bytes:
        raise DecodeError(f"the compressed body inflates to more than {max_bytes} bytes")
    if not inflater.eof:
        raise DecodeError("the compressed body is cut short")
    if inflater.unused_data:
        raise DecodeError(f"{len(inflater.unused_data)} bytes follow the compressed body")
    return out
