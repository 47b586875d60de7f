"""Skiff's Python client: pure Python, asyncio at the core, a blocking facade over it.

It speaks only RocketMQ's remoting protocol, so it works against Skiff and
against Apache RocketMQ 4.x brokers alike. docs/client.md describes it.

- async: `AsyncProducer`, `AsyncTransactionProducer`, `AsyncPushConsumer`,
  `AsyncLitePullConsumer`, `AsyncPullClient` (pull one queue from an offset), `AsyncAdmin`;
- blocking: `Producer`, `TransactionProducer`, `PushConsumer`, `LitePullConsumer`,
  `PullClient`, `Admin`, each running its async twin on one shared background loop;
- values: `Message`, `MessageExt`, `MessageQueue`, `SendResult`, `PullResult`, ...;
- errors: `skiff.client.errors` (all derive from `SkiffError`).

Names are imported on first use, so ``import skiff.client`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # async and blocking clients
    "AsyncProducer": "skiff.client.producer",
    "Producer": "skiff.client.producer",
    "AsyncTransactionProducer": "skiff.client.transaction_producer",
    "TransactionProducer": "skiff.client.transaction_producer",
    "SelectByHash": "skiff.client._impl.selectors",
    "SelectRandom": "skiff.client._impl.selectors",
    "SelectRoundRobin": "skiff.client._impl.selectors",
    "AsyncPullClient": "skiff.client.pull_client",
    "PullClient": "skiff.client.pull_client",
    "AsyncAdmin": "skiff.client.admin",
    "Admin": "skiff.client.admin",
    "AsyncPushConsumer": "skiff.client.push_consumer",
    "PushConsumer": "skiff.client.push_consumer",
    "AsyncLitePullConsumer": "skiff.client.lite_pull_consumer",
    "LitePullConsumer": "skiff.client.lite_pull_consumer",
    # consumer listeners' contexts and queue allocation strategies
    "ConsumeConcurrentlyContext": "skiff.client._impl.listener",
    "ConsumeOrderlyContext": "skiff.client._impl.listener",
    "AllocateAverage": "skiff.client._impl.strategies",
    "AllocateAverageByCircle": "skiff.client._impl.strategies",
    "AllocateConsistentHash": "skiff.client._impl.strategies",
    "AllocateMachineRoomNearby": "skiff.client._impl.strategies",
    "AllocateByMachineRoom": "skiff.client._impl.strategies",
    "AllocateByConfig": "skiff.client._impl.strategies",
    # values
    "Message": "skiff.common.message",
    "MessageQueue": "skiff.common.message",
    "SendStatus": "skiff.client.results",
    "SendResult": "skiff.client.results",
    "LocalTransactionState": "skiff.client.transaction_producer",
    "TransactionSendResult": "skiff.client.transaction_producer",
    "PullStatus": "skiff.client.results",
    "PullResult": "skiff.client.results",
    "RawPullResult": "skiff.client.results",
    "ConsumeStatus": "skiff.client.results",
    "ConsumeOrderlyStatus": "skiff.client.results",
    "MessageSelector": "skiff.client.results",
    "MessageModel": "skiff.protocol.bodies.heartbeat",
    "ConsumeFromWhere": "skiff.protocol.bodies.heartbeat",
    "ClientConfig": "skiff.client._impl.config",
    "Credentials": "skiff.client.credentials",
    "TlsClientConfig": "skiff.transport.tls",
    # errors
    "SkiffError": "skiff.common.errors",
    "ClientError": "skiff.client.errors",
}
_RENAMED: dict[str, tuple[str, str]] = {
    "MessageExt": ("skiff.common.stored_message", "StoredMessage"),
}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _RENAMED:
        module, attr = _RENAMED[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'skiff.client' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
