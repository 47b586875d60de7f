"""PULL_MESSAGE (11) request and response headers.

``sysFlag`` holds `skiff.common.sysflag.PullSysFlag` bits (COMMIT_OFFSET,
SUSPEND, SUBSCRIPTION, ...). The response goes out on every pull code
(SUCCESS, PULL_NOT_FOUND, PULL_RETRY_IMMEDIATELY, PULL_OFFSET_MOVED): the C++
client raises on a pull answer without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader(Header):
    """``subscription`` is the tag or SQL92 expression; ``expressionType`` absent means TAG."""

    consumer_group: str
    topic: str
    queue_id: Int32
    queue_offset: int
    max_msg_nums: Int32
    sys_flag: Int32
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    bname: str | None = None


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
