"""In and out messages per second, sampled from the brokers' runtime counters for the live charts.

Brokers report running totals (``msgPutTotalTodayNow``, ``msgGetTotalTodayNow``);
a rate is the difference of two samples over the time between them. A broker
that restarted (its total went down) or did not answer counts as 0 for that
interval rather than as a spike.

Sampling runs only while someone looks: `watch` (each chart or cluster request)
starts it, and it stops by itself ``idle_s`` after the last look. Every login has
its own `Rates` (its requests are signed with its own keys), so an idle login, or a
dashboard nobody has open, asks the brokers nothing.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

from skiff.client.admin import AsyncAdmin

log = logging.getLogger(__name__)


class Rates:
    def __init__(self, admin: AsyncAdmin, interval_s: float, history_points: int, idle_s: float = 60.0) -> None:
        self.admin = admin
        self.interval_s = interval_s
        self.idle_s = idle_s
        self.history: collections.deque[tuple[float, float, float]] = collections.deque(maxlen=history_points)
        """(unix time s, in msg/s, out msg/s) over all brokers."""
        self._last: dict[str, tuple[float, int, int]] = {}
        self._tps: dict[str, tuple[float, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._watched_at = 0.0

    @property
    def sampling(self) -> bool:
        return self._task is not None and not self._task.done()

    def watch(self) -> None:
        """Someone looks at the rates: sample (again) until nobody has for ``idle_s``."""
        self._watched_at = time.monotonic()
        if not self.sampling:
            self._last.clear()  # a rate over the idle gap would be no rate of now
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while time.monotonic() - self._watched_at <= self.idle_s:
            try:
                await self.sample()
            except Exception as exc:  # noqa: BLE001 - a NameServer away for a while must not end the charts
                log.debug("sampling broker rates failed: %s", exc)
            await asyncio.sleep(self.interval_s)

    async def sample(self) -> None:
        now = time.time()
        counters = {}
        for b in await self.admin.brokers():
            if b.error is None:
                counters[b.addr] = (int(b.runtime.get("msgPutTotalTodayNow", 0)),
                                    int(b.runtime.get("msgGetTotalTodayNow", 0)))
        self.record(now, counters)

    def record(self, now: float, counters: dict[str, tuple[int, int]]) -> None:
        """Take one sample: per broker address its (put total, get total) at ``now``."""
        tps: dict[str, tuple[float, float]] = {}
        for addr, (put, got) in counters.items():
            before = self._last.get(addr)
            if before is not None and now > before[0]:
                span = now - before[0]
                tps[addr] = (max(put - before[1], 0) / span, max(got - before[2], 0) / span)
            self._last[addr] = (now, put, got)
        self._tps = tps
        if tps:
            self.history.append((now, sum(t[0] for t in tps.values()), sum(t[1] for t in tps.values())))

    def broker_tps(self, addr: str) -> tuple[float, float]:
        return self._tps.get(addr, (0.0, 0.0))

    def snapshot(self) -> dict[str, Any]:
        """Columns for the chart: times (s), in rates, out rates."""
        return {"time": [p[0] for p in self.history], "in_tps": [round(p[1], 2) for p in self.history],
                "out_tps": [round(p[2], 2) for p in self.history]}
