"""Waiting on conditions with deadlines, never on fixed sleeps."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

POLL_S = 0.02


# The value returned is truthy, so never None: a check typed ``int | None`` gives an int.
@overload
async def eventually(check: Callable[[], Awaitable[T | None]], timeout_s: float = ..., what: str = ...) -> T: ...


@overload
async def eventually(check: Callable[[], T | None], timeout_s: float = ..., what: str = ...) -> T: ...


async def eventually(check: Callable[[], T | None | Awaitable[T | None]], timeout_s: float = 15.0,
                     what: str = "the condition") -> T:
    """Call ``check`` (sync or async) until it returns something truthy; return that value.

    Raises AssertionError naming ``what`` and the last value when ``timeout_s`` passes first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s (last: {value!r})")
        await asyncio.sleep(POLL_S)


def wait_for(check: Callable[[], T], timeout_s: float = 15.0, what: str = "the condition") -> T:
    """`eventually` for blocking code."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s (last: {value!r})")
        time.sleep(POLL_S)
