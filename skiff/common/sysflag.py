"""Bit fields of a message's sysFlag and a pull request's sysFlag (RocketMQ's values)."""

from enum import IntFlag


class MessageSysFlag(IntFlag):
    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20


TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0


def transaction_type(sys_flag: int) -> int:
    """The transaction type bits: 0 NOT, 4 PREPARED, 8 COMMIT, 12 ROLLBACK."""
    return sys_flag & TRANSACTION_TYPE_MASK


def with_transaction_type(sys_flag: int, tx_type: int) -> int:
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | tx_type


class PullSysFlag(IntFlag):
    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10
