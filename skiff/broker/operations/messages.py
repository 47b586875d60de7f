"""Finding stored messages: one by its CommitLog offset (the tail of an offsetMsgId) and those
with a key within a time range, for remoting's VIEW_MESSAGE_BY_ID and QUERY_MESSAGE (`skiff
message`, the dashboard's message pages, the clients' viewMessage and queryMessage).

The index holds both KEYS and UNIQ_KEY (the id clients show), so a query by unique id is a
key query too. Both answer stored-format records, as pulls do. A key query's outcome says
how far the index reached (RocketMQ's indexLastUpdateTimestamp and
indexLastUpdatePhyoffset), found or not, so a client asking several brokers can tell an
index that is behind from a key that is not there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from skiff.broker.operations.refusal import Refusal
from skiff.protocol.codes import ResponseCode
from skiff.store import MessageStore


@dataclass(frozen=True, slots=True)
class KeyQuery:
    topic: str
    key: str
    """A KEYS entry or a message's unique id (UNIQ_KEY)."""
    max_num: int
    begin_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class KeyMatches:
    records: list[bytes]
    """Stored records, newest first (empty: none matched)."""
    index_updated_ms: int
    index_offset: int
    """The CommitLog offset the index is built up to."""


class MessagesOperation:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.tier_record: Callable[[int], Awaitable[bytes | None]] | None = None
        """Set when the broker has a tier: the record at a CommitLog offset retention deleted, from
        the tiered file that holds it (`skiff.broker.tier.queries`), for a consumer's send-back of
        a message it read through the tier. VIEW_MESSAGE_BY_ID reaches the tier by its own hook."""

    def view(self, physical_offset: int) -> bytes | Refusal:
        """The stored record at a CommitLog offset (SYSTEM_ERROR when there is none, as RocketMQ's)."""
        record = self.store.read_record(physical_offset)
        if record is None:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset {physical_offset}")
        return record

    def by_key(self, query: KeyQuery) -> KeyMatches:
        """The records of the topic with the key stored in [begin_ms, end_ms], at most
        ``max_num`` (and the store's maxMsgsNumBatch)."""
        records = self.store.query_by_key(query.topic, query.key, query.max_num, query.begin_ms, query.end_ms)
        return KeyMatches(records, self.store.clock.now_ms(), self.store.dispatched_offset)


def not_found(query: KeyQuery) -> Refusal:
    """What a door answers for a key query that matched nothing (QUERY_NOT_FOUND)."""
    return Refusal(ResponseCode.QUERY_NOT_FOUND,
                   f"no message of topic {query.topic} has the key {query.key!r} in that time range")
