"""A wait with a timeout that another callback can cut short.

`asyncio.wait_for(event.wait(), t)` costs a task per wait and, on Python 3.11,
can swallow a cancellation that arrives as the wait ends (the cancelled loop
then runs on). `Wakeup.wait` awaits one plain future resolved by `set` or by a
timer, so a cancel always lands and a wait costs no task.
"""

from __future__ import annotations

import asyncio


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Wakeup:
    """`set` ends the current `wait` (a `set` with nobody waiting is not remembered)."""

    __slots__ = ("_fut",)

    def __init__(self) -> None:
        self._fut: asyncio.Future[None] | None = None

    def set(self) -> None:
        if self._fut is not None:
            _resolve(self._fut)

    async def wait(self, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._fut = fut
        timer = loop.call_later(timeout_s, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()
            if self._fut is fut:
                self._fut = None
