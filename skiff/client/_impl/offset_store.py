"""Where a consumer group's progress is kept: on the brokers (clustering) or in a
local file (broadcasting), RocketMQ's RemoteBrokerOffsetStore and LocalFileOffsetStore.

Both keep a table in memory that consumption updates (cheap, every batch) and
write it out on a schedule (`persist_all` every 5 s), when a queue leaves this
client (`persist`) and at shutdown. An offset is the next message to consume.

The local file is JSON, written to a temporary file, synced, and renamed over
the old one (kept as ``.bak``), so a crash leaves either the old or the new
table, never half of one.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

import orjson

from skiff.common.errors import CorruptionError
from skiff.common.files import replace_atomically
from skiff.common.message import MessageQueue

log = logging.getLogger(__name__)

NO_OFFSET = -1
"""What `OffsetStore.read` returns for a queue the group has no offset for."""

DEFAULT_OFFSETS_DIR = Path("~/.skiff/offsets")
"""Where broadcasting consumers keep their files, one directory per client."""


class ReadFrom(enum.Enum):
    MEMORY = "memory"
    STORE = "store"
    MEMORY_THEN_STORE = "memory then store"


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None: ...

    async def read(self, mq: MessageQueue, where: ReadFrom) -> int: ...

    def read_memory(self, mq: MessageQueue) -> int: ...

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...

    def table(self) -> dict[MessageQueue, int]: ...


class BrokerOffsets(Protocol):
    """The two broker calls a clustering offset store needs (QUERY/UPDATE_CONSUMER_OFFSET)."""

    async def query_consumer_offset(self, mq: MessageQueue) -> int | None:
        """The group's stored offset, None when the broker has none (QUERY_NOT_FOUND)."""
        ...

    async def update_consumer_offset(self, mq: MessageQueue, offset: int) -> None: ...


class _MemoryTable:
    """The in-memory part both stores share."""

    def __init__(self) -> None:
        self._offsets: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        if offset < 0:
            return
        if increase_only and offset <= self._offsets.get(mq, -1):
            return
        self._offsets[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        return self._offsets.get(mq, NO_OFFSET)

    def remove(self, mq: MessageQueue) -> None:
        self._offsets.pop(mq, None)

    def table(self) -> dict[MessageQueue, int]:
        return dict(self._offsets)


class RemoteOffsetStore(_MemoryTable):
    """Clustering: the brokers keep each queue's offset for the group.

    `read` from the store raises what the broker call raised (other than "no
    offset"), so a rebalance can skip the queue and try again later rather than
    start it from a guess.
    """

    def __init__(self, broker: BrokerOffsets) -> None:
        super().__init__()
        self._broker = broker

    async def load(self) -> None:
        """Nothing to load: offsets are read from the broker queue by queue."""

    async def read(self, mq: MessageQueue, where: ReadFrom) -> int:
        if where is not ReadFrom.STORE:
            offset = self.read_memory(mq)
            if offset >= 0 or where is ReadFrom.MEMORY:
                return offset
        stored = await self._broker.query_consumer_offset(mq)
        if stored is None:
            return NO_OFFSET
        self._offsets[mq] = stored
        return stored

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs``; forget those of queues not among them."""
        keep = set(mqs)
        for mq in [mq for mq in self._offsets if mq not in keep]:
            del self._offsets[mq]
        if self._offsets:
            results = await asyncio.gather(
                *(self._broker.update_consumer_offset(mq, off) for mq, off in self._offsets.items()),
                return_exceptions=True,
            )
            for mq, result in zip(list(self._offsets), results):
                if isinstance(result, Exception):
                    log.warning("committing the offset of %s failed: %s", mq, result)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self._offsets.get(mq)
        if offset is not None:
            await self._broker.update_consumer_offset(mq, offset)


class LocalFileOffsetStore(_MemoryTable):
    """Broadcasting: every client keeps its own offsets in ``path`` (JSON)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._write_lock = asyncio.Lock()

    @classmethod
    def for_client(cls, base_dir: str | Path | None, client_key: str, group: str) -> LocalFileOffsetStore:
        """``<base_dir>/<client_key>/<group>.json``; ``base_dir`` None means ~/.skiff/offsets."""
        base = Path(base_dir).expanduser() if base_dir is not None else DEFAULT_OFFSETS_DIR.expanduser()
        return cls(base / client_key / f"{group}.json")

    async def load(self) -> None:
        self._offsets.update(await asyncio.to_thread(read_offsets_file, self.path))

    async def read(self, mq: MessageQueue, where: ReadFrom) -> int:
        """The file was read at `load`; the table in memory is the store."""
        return self.read_memory(mq)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the whole table: queues this client no longer holds keep their
        last offsets, so a later start resumes them too."""
        if not self._offsets:
            return
        async with self._write_lock:
            await asyncio.to_thread(write_offsets_file, self.path, dict(self._offsets))

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    def remove(self, mq: MessageQueue) -> None:
        """Kept: the file remembers every queue this client ever consumed."""


def write_offsets_file(path: Path, offsets: Mapping[MessageQueue, int]) -> None:
    """Replace ``path`` atomically with ``offsets``; the previous file stays as ``.bak``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
        for mq, off in sorted(offsets.items())
    ]
    data = orjson.dumps({"offsetTable": rows}, option=orjson.OPT_INDENT_2)

    def keep_backup() -> None:
        if path.exists():
            os.replace(path, path.with_name(path.name + ".bak"))

    replace_atomically(path, data, before_rename=keep_backup)


def read_offsets_file(path: Path) -> dict[MessageQueue, int]:
    """The table in ``path`` (its ``.bak`` when it is missing or damaged; {} when neither exists).

    Raises `CorruptionError` naming the file when neither decodes: starting
    from nothing would silently re-consume or skip a whole topic.
    """
    errors = []
    for candidate in (path, path.with_name(path.name + ".bak")):
        if not candidate.exists():
            continue
        try:
            return _parse_offsets(candidate.read_bytes())
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("offsets file %s is damaged: %s", candidate, exc)
            errors.append(f"{candidate}: {exc}")
    if errors:
        raise CorruptionError("cannot read the consumer offsets: " + "; ".join(errors))
    return {}


def _parse_offsets(raw: bytes) -> dict[MessageQueue, int]:
    doc = orjson.loads(raw)
    out: dict[MessageQueue, int] = {}
    for row in doc["offsetTable"]:
        mq = MessageQueue(str(row["topic"]), str(row["brokerName"]), int(row["queueId"]))
        offset = row["offset"]
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset {offset!r} of {mq} is not a non-negative integer")
        out[mq] = offset
    return out
