"""One base for background loops: explicit start and stop, a drain timeout on stop.

`Service` runs on asyncio (servers and clients); `PeriodicThread` is the same
idea on a thread, for the store, which does blocking file work and must not
depend on an event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Service:
    """An asyncio background task with start/stop; subclasses implement `run`."""

    name = "service"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._main(), name=self.name)

    async def _main(self) -> None:
        try:
            await self.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("service %s failed", self.name)

    async def run(self) -> None:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until stop; return False once the service is stopping."""
        try:
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            return True
        return False

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the loop to end and wait up to ``timeout_s`` before cancelling it."""
        self._stopping.set()
        task, self._task = self._task, None
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class Periodic(Service):
    """Call ``fn`` every ``interval_s`` seconds; a failure is logged and the loop goes on."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Awaitable[None] | None],
        *,
        initial_delay_s: float | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.interval_s = interval_s
        self._fn = fn
        self._initial_delay_s = interval_s if initial_delay_s is None else initial_delay_s

    async def run(self) -> None:
        delay = self._initial_delay_s
        while await self.sleep(delay):
            delay = self.interval_s
            try:
                result = self._fn()
                if result is not None:
                    await result
            except Exception:
                log.exception("periodic task %s failed", self.name)


class PeriodicThread:
    """Call ``fn`` every ``interval_s`` seconds on a daemon thread until stopped."""

    def __init__(self, name: str, interval_s: float, fn: Callable[[], None]) -> None:
        self.name = name
        self.interval_s = interval_s
        self._fn = fn
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._fn()
            except Exception:
                log.exception("periodic thread %s failed", self.name)

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
