"""END_TRANSACTION (37, client to broker) and CHECK_TRANSACTION_STATE (39, broker to client).

``commitOrRollback`` holds the transaction type bits of the sysFlag: 8 commit,
12 rollback, 0 unknown (`skiff.common.sysflag.MessageSysFlag`).
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader(Header):
    """``tranStateTableOffset`` is the half message's queue offset; ``commitLogOffset`` its CommitLog offset."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: Int32
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader(Header):
    """The body is the half message in the stored format, with its real topic and queue restored."""

    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    bname: str | None = None
