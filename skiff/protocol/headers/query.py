"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12) headers.

Both answer with stored-format records as the body. QUERY_MESSAGE by unique
id (rather than by KEYS) is flagged by the extra ext field ``_UNIQUE_KEY_QUERY``.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header, Int32


@dataclass(frozen=True, slots=True)
class ViewMessageRequestHeader(Header):
    """``offset`` is the CommitLog offset (the last 8 bytes of an offsetMsgId)."""

    offset: int


@dataclass(frozen=True, slots=True)
class QueryMessageRequestHeader(Header):
    WIRE_NAMES = {"unique_key_query": "_UNIQUE_KEY_QUERY"}

    topic: str
    key: str
    max_num: Int32
    begin_timestamp: int
    end_timestamp: int
    unique_key_query: bool = False


@dataclass(frozen=True, slots=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int
