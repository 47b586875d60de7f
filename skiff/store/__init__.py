"""The message store: CommitLog, ConsumeQueues, IndexFile, dispatcher, flush, recovery
and retention. Files only: it imports nothing but `skiff.common` (see docs/store.md)."""

from skiff.store.config import FlushDiskType, StoreConfig
from skiff.store.message_store import MessageStore
from skiff.store.results import (
    GetResult,
    GetStatus,
    MessageInput,
    PutResult,
    PutStatus,
    RecoveryReport,
    RetentionReport,
    StoreStats,
)

__all__ = [
    "FlushDiskType",
    "GetResult",
    "GetStatus",
    "MessageInput",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "RetentionReport",
    "StoreConfig",
    "StoreStats",
]
