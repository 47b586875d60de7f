"""Request timeouts grouped into short buckets: one loop timer per bucket rather
than one per request.

A pipelined burst of requests with the same timeout shares one timer, and an
answered request costs nothing to "cancel" (its key is simply no longer
pending when the bucket fires). A timeout fires up to `RESOLUTION_S` late.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

RESOLUTION_S = 0.01
"""Width of a bucket: timeouts that end within the same 10 ms share one timer."""


class Deadlines:
    """Calls ``expire(key, bucket)`` for each key once its bucket's time comes."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expire: Callable[[int, int], None]) -> None:
        self._loop = loop
        self._expire = expire
        self._buckets: dict[int, list[int]] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}

    def add(self, key: int, timeout_s: float) -> int:
        """Schedule ``key`` to expire after ``timeout_s``; returns its bucket, which
        the caller keeps to tell a stale expiry from a live one."""
        bucket = math.ceil((self._loop.time() + timeout_s) / RESOLUTION_S)
        keys = self._buckets.get(bucket)
        if keys is None:
            keys = self._buckets[bucket] = []
            self._timers[bucket] = self._loop.call_at(bucket * RESOLUTION_S, self._fire, bucket)
        keys.append(key)
        return bucket

    def clear(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._buckets.clear()

    def _fire(self, bucket: int) -> None:
        self._timers.pop(bucket, None)
        for key in self._buckets.pop(bucket, ()):
            self._expire(key, bucket)
