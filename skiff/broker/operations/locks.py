"""Orderly consumers' queue locks, for remoting's LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.

An orderly consumer locks its queues before it pulls them and every 20 s after; a lock
lasts ``rebalanceLockMaxLiveTime`` past its last renewal (`RebalanceLockManager`), and
only its holder may renew or release it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.locks import RebalanceLockManager
from skiff.common.message import MessageQueue


@dataclass(frozen=True, slots=True)
class LockRequest:
    group: str
    client_id: str
    queues: tuple[MessageQueue, ...]


class LocksOperation:
    def __init__(self, locks: RebalanceLockManager) -> None:
        self.locks = locks

    def lock(self, request: LockRequest) -> list[MessageQueue]:
        """Lock or renew each queue that is free, expired or already the client's: the queues
        the client now holds, in request order (a queue another client holds is left out)."""
        return self.locks.try_lock(request.group, request.queues, request.client_id)

    def unlock(self, request: LockRequest) -> None:
        """Release the queues the client holds (others' locks stay)."""
        self.locks.unlock(request.group, request.queues, request.client_id)
