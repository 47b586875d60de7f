"""Event loops: uvloop when it is installed, and `run` for server processes.

`run` gives the server's main coroutine an event that SIGTERM or SIGINT sets,
so the server stops the way it chose (drain, flush, unregister) instead of
dying in the middle of a write. A second signal cancels the main coroutine.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from skiff.transport.allocator import tune_for_server

log = logging.getLogger(__name__)

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's loop constructor when available, else asyncio's default."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh (uv)loop, as `asyncio.run` does."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)


def run(main: Callable[[asyncio.Event], Coroutine[Any, Any, T]]) -> T:
    """Run ``main(stop)`` where ``stop`` is set on the first SIGTERM or SIGINT.

    A second signal cancels ``main``; that surfaces as `KeyboardInterrupt`. The process's
    allocator is tuned for a server first (`skiff.transport.allocator`).
    """
    tune_for_server()
    try:
        return run_coroutine(_with_stop_signals(main))
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


async def _with_stop_signals(main: Callable[[asyncio.Event], Coroutine[Any, Any, T]]) -> T:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    task = asyncio.current_task()
    assert task is not None

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("second %s: stopping at once", sig.name)
            task.cancel()
        else:
            log.info("%s received: stopping", sig.name)
            stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await main(stop)
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
