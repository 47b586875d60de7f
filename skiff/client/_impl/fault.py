"""Broker latency fault avoidance (RocketMQ's LatencyFaultTolerance and MQFaultStrategy).

After each send the producer reports how long the broker took; a slow broker
(or, after a failure, any broker: a failure counts as 30 s) is avoided for a
while, by this table:

| send latency at least (ms) | 50 | 100 | 550    | 1000   | 2000    | 3000    | 15000   |
|----------------------------|----|-----|--------|--------|---------|---------|---------|
| avoided for (ms)           | 0  | 0   | 30 000 | 60 000 | 120 000 | 180 000 | 600 000 |

Queue choice walks the topic's queues round-robin and takes the first whose
broker is not avoided; when every broker is avoided it takes the least bad
one. With avoidance disabled, a retry still moves to another broker than the
one that just failed when the topic has one.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from skiff.client._impl.route import TopicPublishInfo
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.message import MessageQueue

LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
FAILURE_LATENCY_MS = 30_000
"""What a failed send counts as (RocketMQ isolates the broker as if it took 30 s)."""


_AVOIDED_FROM_MS = min(limit for limit, duration in zip(LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS) if duration)
"""The least latency that gets a broker avoided (below it, every send's case, the answer is 0)."""


def not_available_duration_ms(latency_ms: float) -> int:
    """How long to avoid a broker after a send that took ``latency_ms``."""
    if latency_ms < _AVOIDED_FROM_MS:
        return 0
    for limit, duration in zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS)):
        if latency_ms >= limit:
            return duration
    return 0


@dataclass(slots=True)
class FaultItem:
    name: str
    latency_ms: float
    available_at_s: float
    """Monotonic time from which the broker may be used again."""


class LatencyFaultTolerance:
    """Which brokers to avoid for now, from the latency of their last send."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._items: dict[str, FaultItem] = {}

    def update(self, name: str, latency_ms: float, not_available_ms: int) -> None:
        available_at_s = self._clock.monotonic() + not_available_ms / 1000
        item = self._items.get(name)
        if item is None:
            self._items[name] = FaultItem(name, latency_ms, available_at_s)
        else:  # updated in place: a send's report allocates nothing
            item.latency_ms = latency_ms
            item.available_at_s = available_at_s

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or self._clock.monotonic() >= item.available_at_s

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def least_bad(self) -> str | None:
        """The broker to use when all are avoided: the soonest available, then the fastest."""
        if not self._items:
            return None
        return min(self._items.values(), key=lambda i: (i.available_at_s, i.latency_ms)).name


class FaultStrategy:
    """Chooses a queue for each send attempt and learns from its outcome."""

    def __init__(self, enabled: bool = True, clock: Clock = SYSTEM_CLOCK, rng: random.Random | None = None) -> None:
        self.enabled = enabled
        self.faults = LatencyFaultTolerance(clock)
        self._rng = rng or random
        self._counters: dict[str, Iterator[int]] = {}
        """One round-robin position per topic, from a random start (RocketMQ's
        ``TopicPublishInfo.sendWhichQueue``). One counter for every topic made a
        producer that sends to topics in turn use one residue class of each topic's
        queues: 16 topics of 1,024 queues in turn were 64 queues each, not 1,024."""

    def _next(self, topic: str) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = itertools.count(self._rng.randrange(1 << 16))
        return next(counter)

    def select(self, info: TopicPublishInfo, last_broker: str | None = None) -> MessageQueue:
        queues = info.queues
        n = len(queues)
        start = self._next(info.topic)
        if self.enabled:
            for i in range(n):
                mq = queues[(start + i) % n]
                if self.faults.is_available(mq.broker_name) and mq.broker_name != last_broker:
                    return mq
            fallback = self.faults.least_bad()
            of_fallback = [q for q in queues if q.broker_name == fallback]
            if of_fallback:
                return of_fallback[start % len(of_fallback)]
        for i in range(n):
            mq = queues[(start + i) % n]
            if mq.broker_name != last_broker:
                return mq
        return queues[start % n]

    def update(self, broker_name: str, latency_ms: float, *, failed: bool) -> None:
        """Record a send's outcome: its latency, or a failure (the broker is isolated)."""
        if self.enabled:
            duration = not_available_duration_ms(FAILURE_LATENCY_MS if failed else latency_ms)
            self.faults.update(broker_name, latency_ms, duration)
