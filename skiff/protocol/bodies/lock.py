"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42) bodies, for orderly consumers.

Both requests carry a `LockBatchRequestBody` (Java's LockBatchRequestBody and
UnlockBatchRequestBody have the same fields); a lock answers with the queues
now held by that client, an unlock with no body.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.common.message import MessageQueue
from skiff.protocol.bodies.base import JsonBody


@dataclass(frozen=True, slots=True)
class LockBatchRequestBody(JsonBody):
    consumer_group: str
    client_id: str
    mq_set: tuple[MessageQueue, ...] = ()


@dataclass(frozen=True, slots=True)
class LockBatchResponseBody(JsonBody):
    WIRE_NAMES = {"lock_ok_mq_set": "lockOKMQSet"}

    lock_ok_mq_set: tuple[MessageQueue, ...] = ()
