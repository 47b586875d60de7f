"""Requests held on the event loop until one of their queues is told of, from any thread.

A door that holds a request (a Kafka Fetch waiting for data, a gRPC PullMessage waiting for the
tier) registers an `asyncio.Event` under each (topic, queue id) it reads; the store's dispatch
listener (`QueueWaiters.notify`, on whatever thread appended) and the tier's ready listeners
(`QueueWaiters.wake`, on its worker threads: skiff.broker.tier.reads) set the events of those
queues, hopping onto the loop when called from elsewhere. The holder reads again when its event
is set, and gives up at its own deadline. `close` sets every event and makes `closed` true, so
what is held ends at once when the broker stops instead of at its deadline.

The remoting door's long polling is `skiff.broker.long_polling` instead: it answers a held pull
from the wake-up itself (a `LateAnswer`), without a task per pull.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

QueueKey = tuple[str, int]
"""(topic, queue id)."""


class QueueWaiters:
    """Events of held requests by queue, set from any thread; `start` on the loop that holds them."""

    def __init__(self) -> None:
        self._waiting: dict[QueueKey, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """True from `close` on: the broker is stopping, a holder answers now."""
        return self._closed

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def close(self) -> None:
        """Set every event held now (on the loop): their holders read once more and answer."""
        self._closed = True
        for events in self._waiting.values():
            for event in events:
                event.set()

    def notify(self, touched: Sequence[tuple[str, int, int]]) -> None:
        """The store's dispatch listener: (topic, queue id, new max offset) per queue grown."""
        if not self._waiting or self._loop is None:
            return
        if threading.get_ident() == self._thread:
            self._wake(touched)
        else:
            try:
                self._loop.call_soon_threadsafe(self._wake, touched)
            except RuntimeError:  # the loop is closed: shutting down
                pass

    def _wake(self, touched: Sequence[tuple[str, int, int]]) -> None:
        for topic, queue_id, _ in touched:
            for event in self._waiting.get((topic, queue_id), ()):
                event.set()

    def wake(self, keys: Sequence[QueueKey]) -> None:
        """Wake what is held on ``keys`` (from any thread): the tier's work one of them waited for
        ended (a `TierReads.ready_listeners` entry), so it reads again now, not at its deadline."""
        if self._waiting:
            self.notify([(topic, queue_id, 0) for topic, queue_id in keys])

    def register(self, keys: Sequence[QueueKey], event: asyncio.Event) -> None:
        for key in keys:
            self._waiting.setdefault(key, set()).add(event)

    def unregister(self, keys: Sequence[QueueKey], event: asyncio.Event) -> None:
        for key in keys:
            events = self._waiting.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiting[key]
