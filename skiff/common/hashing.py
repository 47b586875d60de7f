"""Stable, fast hashes for ConsumeQueue tag codes and IndexFile keys.

RocketMQ uses Java's String.hashCode; Skiff's broker computes both sides of
every comparison itself (stored codes and subscription codes), so any stable
hash works, and zlib's CRC-32 is C-fast and the same on every platform.
"""

from __future__ import annotations

import zlib


def tag_hash(tags: str | None) -> int:
    """The ConsumeQueue tag code of a TAGS value (0 when there are no tags)."""
    if not tags:
        return 0
    return zlib.crc32(tags.encode())


def index_key_hash(topic: str, key: str) -> int:
    """The IndexFile hash of a key within its topic: a non-negative int32."""
    return zlib.crc32(f"{topic}#{key}".encode()) & 0x7FFFFFFF
