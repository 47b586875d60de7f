"""Checks a message or batch must pass before anything is written.

A failure is a `PutResult` with MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED and
a reason a client can read; nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from skiff.common import kernels
from skiff.common.limits import BATCH_MAX_MESSAGES, PROPERTIES_MAX_BYTES
from skiff.common.names import topic_error
from skiff.common.record import HOST_V4_BYTES, HOST_V6_BYTES, record_size
from skiff.store.commitlog import BLANK_MIN_BYTES
from skiff.store.dispatcher import NOT_CONSUMABLE
from skiff.store.results import MessageInput, PutResult, PutStatus

_INT32_MAX = 2**31 - 1
_TOPIC_CACHE_MAX = 65536
_HOST_BYTES = (HOST_V4_BYTES, HOST_V6_BYTES)


class Checked(NamedTuple):
    """A batch that passed, and what the append needs to know about it: the record sizes
    and the columns the dispatch reads, collected by the same pass."""

    topic_raw: bytes
    sizes: list[int]
    total: int
    sys_flags: list[int]
    tags: list[str | None]
    keys: list[str | None]
    uniq_keys: list[str | None]
    consumable: bool
    """Every record goes into the ConsumeQueue (no prepared or rolled-back transaction)."""
    key_count: int
    """Index keys the batch has at most (UNIQ_KEYs and KEYS words)."""


def _illegal(reason: str, status: PutStatus = PutStatus.MESSAGE_ILLEGAL) -> PutResult:
    return PutResult(status, reason)


class MessageChecker:
    """Validates appends; remembers topics that passed so the name check runs once per topic."""

    def __init__(self, max_body_bytes: int, file_size: int, store_host_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.file_size = file_size
        self.store_host_bytes = store_host_bytes
        self._topics: dict[str, bytes] = {}
        self._bare_record = record_size(0, 0, 0, 0, store_host_bytes)
        """A record's size without body, topic, properties and born host (sizes add up)."""

    def topic_bytes(self, topic: str) -> bytes | str:
        """The UTF-8 topic, or why the name is refused."""
        raw = self._topics.get(topic)
        if raw is not None:
            return raw
        error = topic_error(topic)
        if error is not None:
            return error
        if len(self._topics) >= _TOPIC_CACHE_MAX:
            self._topics.clear()
        raw = self._topics[topic] = topic.encode()
        return raw

    def check(self, msgs: Sequence[MessageInput]) -> Checked | PutResult:
        if not msgs:
            return _illegal("the batch is empty")
        if len(msgs) > BATCH_MAX_MESSAGES:
            return _illegal(f"the batch has {len(msgs)} messages, more than the {BATCH_MAX_MESSAGES} allowed")
        first = msgs[0]
        topic_raw = self._topics.get(first.topic)  # `topic_bytes`'s cache first: one call fewer per put
        if topic_raw is None:
            raw_or_error = self.topic_bytes(first.topic)
            if isinstance(raw_or_error, str):
                return _illegal(raw_or_error)
            topic_raw = raw_or_error
        if not 0 <= first.queue_id <= _INT32_MAX:
            return _illegal(f"queue id {first.queue_id} is out of range")
        base = self._bare_record + len(topic_raw)  # record_size(0, len(topic_raw), 0, 0, store host)
        sizes, sys_flags, tags, keys, uniq_keys, any_flags, key_count, bad = batch_columns(
            msgs, first.topic, first.queue_id, self.max_body_bytes, base)
        if bad >= 0:
            return self._refusal(msgs[bad], first)
        total = sum(sizes)
        if total != self.file_size and total > self.file_size - BLANK_MIN_BYTES:
            return _illegal(
                f"the records take {total} bytes, more than a CommitLog file holds "
                f"(mappedFileSizeCommitLog={self.file_size}, less {BLANK_MIN_BYTES} for an end-of-file record)"
            )
        return Checked(topic_raw, sizes, total, sys_flags, tags, keys, uniq_keys, not any_flags & NOT_CONSUMABLE,
                       key_count)

    def _refusal(self, m: MessageInput, first: MessageInput) -> PutResult:
        """Why ``m`` failed the checks of `check` (kept out of its loop, which is hot)."""
        if m.topic != first.topic or m.queue_id != first.queue_id:
            return _illegal("a batch must go to one topic and queue")
        if len(m.body) > self.max_body_bytes:
            return _illegal(f"the body is {len(m.body)} bytes, more than maxMessageSize={self.max_body_bytes}")
        if len(m.properties) > PROPERTIES_MAX_BYTES:
            return _illegal(
                f"the properties take {len(m.properties)} bytes, more than {PROPERTIES_MAX_BYTES}",
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
            )
        return _illegal(f"the born host is {len(m.born_host)} bytes, not a packed IPv4 or IPv6 address")


def batch_columns_py(msgs: Sequence[MessageInput], topic: str, queue_id: int, max_body: int,
                     base: int) -> tuple[list[int], list[int], list[str | None], list[str | None], list[str | None],
                                         int, int, int]:
    """One pass over a batch: record sizes (``base`` + body, properties and born host),
    sysFlags, tags, keys and unique keys as columns, the sysFlags or-ed, the index keys it
    has at most, and the number of the first message that fails the checks (-1: none)."""
    sizes: list[int] = []
    sys_flags: list[int] = []
    tags: list[str | None] = []
    keys: list[str | None] = []
    uniq_keys: list[str | None] = []
    any_flags = key_count = 0
    for i, m in enumerate(msgs):
        m_topic, m_queue_id, body, props, _, sys_flag, _, host, _, _, tag, words, uniq = m
        body_len, props_len, host_len = len(body), len(props), len(host)
        if (m_topic != topic or m_queue_id != queue_id or body_len > max_body or props_len > PROPERTIES_MAX_BYTES
                or host_len not in _HOST_BYTES):
            return sizes, sys_flags, tags, keys, uniq_keys, any_flags, key_count, i
        sizes.append(base + body_len + props_len + host_len)
        sys_flags.append(sys_flag)
        tags.append(tag)
        keys.append(words)
        uniq_keys.append(uniq)
        any_flags |= sys_flag
        if uniq is not None:
            key_count += 1
        if words:
            key_count += words.count(" ") + 1
    return sizes, sys_flags, tags, keys, uniq_keys, any_flags, key_count, -1


batch_columns = kernels.select("batch_columns", batch_columns_py, "skiff.store._kernels")
