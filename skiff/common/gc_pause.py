"""Python's cyclic garbage collector paused while a bulk of acyclic objects is built.

The collector runs after every ~700 container allocations and, as the heap grows, scans the
older generations again: building a long tier manifest (30,000 segments, 750,000 byte ranges)
spent 2.7 of its 4.7 s of CPU in collections that found nothing, since nothing it builds
refers back to itself. Paused, the build takes 1.9 s (docs/performance.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off inside, on again after if it was on (so a pause inside a pause, or
    under a caller that turned it off, leaves it as it found it). It is process-wide: other
    threads' cycles wait for the end of the pause, not longer."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
