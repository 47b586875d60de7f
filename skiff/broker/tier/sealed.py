"""Which of a queue's records may go to the tier now."""

from __future__ import annotations

from skiff.common.record import read_head


def sealed_run(buf: bytes, end_offset: int, flushed: int) -> bytes:
    """The leading records of ``buf`` (one queue's, in offset order) with a queue offset below
    ``end_offset`` and every byte below the CommitLog's ``flushed`` offset. An unflushed record
    is never uploaded: after a crash its offset could be given to another message, and the tier
    would then hold a message the broker never kept."""
    pos = 0
    while pos < len(buf):
        head = read_head(buf, pos)
        if head.queue_offset >= end_offset or head.physical_offset + head.total_size > flushed:
            break
        pos += head.total_size
    return buf[:pos]
