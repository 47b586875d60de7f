"""RebalanceLockManager: which client of a group holds each queue, for orderly consumers.

An orderly consumer locks its queues (LOCK_BATCH_MQ) before it pulls them and
every 20 s after; a lock lasts ``rebalanceLockMaxLiveTime`` (60 s) past its
last renewal, so a consumer that dies without unlocking frees its queues a
minute later. Only the holder may renew or release a queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from skiff.common.clock import Clock
from skiff.common.message import MessageQueue


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    def __init__(self, clock: Clock, max_live_ms: int) -> None:
        self.clock = clock
        self.max_live_ms = max_live_ms
        self._groups: dict[str, dict[MessageQueue, _Lock]] = {}

    def try_lock(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Lock or renew every queue that is free, expired or already ``client_id``'s;
        return the queues ``client_id`` now holds, in request order."""
        now = self.clock.now_ms()
        locks = self._groups.setdefault(group, {})
        held = []
        for mq in queues:
            lock = locks.get(mq)
            if lock is None or lock.client_id == client_id or self._expired(lock, now):
                locks[mq] = _Lock(client_id, now)
                held.append(mq)
        return held

    def unlock(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> None:
        locks = self._groups.get(group)
        if not locks:
            return
        for mq in queues:
            lock = locks.get(mq)
            if lock is not None and lock.client_id == client_id:
                del locks[mq]
        if not locks:
            del self._groups[group]

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding ``mq`` for ``group`` now, or None."""
        lock = self._groups.get(group, {}).get(mq)
        if lock is None or self._expired(lock, self.clock.now_ms()):
            return None
        return lock.client_id

    def _expired(self, lock: _Lock, now: int) -> bool:
        return now - lock.last_update_ms > self.max_live_ms
