"""TraceDispatcher: a client's trace records, buffered and sent to the trace topic in batches
(RocketMQ's AsyncTraceDispatcher).

`record` may be called from any thread (listeners run on a thread pool) and
never waits: a full buffer drops the record and counts it. A task on the
client's loop sends what is buffered every ``flush_interval_ms``, or as soon as
a quarter of the buffer is used, packed into trace messages of at most
``message_max_bytes`` of data and `TRACE_KEYS_MAX_BYTES` of KEYS. Sends go out
through a `ProducerCore` of the client's own instance, one at a time, so a
slow broker makes records wait and then drop instead of piling up requests.
A failed send is logged (the first, then every 100th) and counted. `close`
sends what is left, bounded by the send timeout, and leaves the instance.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Iterator, Sequence

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.producer_impl import ProducerCore, ProducerOptions
from skiff.client._impl.trace_format import TraceRecord, encode, keys_of
from skiff.client.trace import TraceSettings, TraceStats
from skiff.common.limits import GROUP_MAX_CHARS, TRACE_KEYS_MAX_BYTES
from skiff.common.message import Message

log = logging.getLogger(__name__)

TRACE_GROUP_PREFIX = "_INNER_TRACE_PRODUCER"
"""RocketMQ's trace producers' group prefix; the host client's role and group follow it."""
FAILURE_LOG_EVERY = 100


def pack(records: Sequence[TraceRecord], max_bytes: int,
         keys_max_bytes: int = TRACE_KEYS_MAX_BYTES) -> Iterator[tuple[str, list[str], int]]:
    """Trace messages for ``records``: (data, keys, record count), each within both limits
    (a record larger than a limit goes alone)."""
    parts: list[str] = []
    keys: dict[str, None] = {}
    size = keys_size = 0
    for record in records:
        text = encode(record)
        record_keys = keys_of(record)
        add = _size(text)
        add_keys = sum(_size(k) + 1 for k in record_keys if k not in keys)
        if parts and (size + add > max_bytes or keys_size + add_keys > keys_max_bytes):
            yield "".join(parts), list(keys), len(parts)
            parts, keys, size = [], {}, 0
            add_keys = sum(_size(k) + 1 for k in dict.fromkeys(record_keys))
            keys_size = 0
        parts.append(text)
        keys.update(dict.fromkeys(record_keys))
        size += add
        keys_size += add_keys
    if parts:
        yield "".join(parts), list(keys), len(parts)


def _size(text: str) -> int:
    """UTF-8 length (trace text is nearly always ASCII, whose length is its character count)."""
    return len(text) if text.isascii() else len(text.encode())


class TraceDispatcher:
    """Buffers one client's trace records and sends them from the background."""

    def __init__(self, settings: TraceSettings, client_config: ClientConfig, role: str, group: str) -> None:
        self.settings = settings
        self.client_config = client_config
        self.producer_group = f"{TRACE_GROUP_PREFIX}-{role}-{group}"[:GROUP_MAX_CHARS]
        self._lock = threading.Lock()
        self._buffer: deque[TraceRecord] = deque()
        self._wake_at = max(1, settings.buffer_max_records // 4)
        self._recorded = self._dropped = self._sent = self._failed = 0
        self._accepting = False
        self._instance: ClientInstance | None = None
        self._core: ProducerCore | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def client_host(self) -> str:
        return self.client_config.client_ip

    @property
    def instance(self) -> ClientInstance | None:
        return self._instance

    def record(self, record: TraceRecord) -> bool:
        """Take ``record`` for sending; False (and counted) when the buffer is full or closed."""
        with self._lock:
            if not self._accepting or len(self._buffer) >= self.settings.buffer_max_records:
                self._dropped += 1
                return False
            self._buffer.append(record)
            self._recorded += 1
            wake = len(self._buffer) == self._wake_at
        if wake and self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)
        return True

    def stats(self) -> TraceStats:
        with self._lock:
            return TraceStats(self._recorded, self._dropped, self._sent, self._failed, len(self._buffer))

    async def start(self) -> None:
        """Join the client instance of ``client_config`` and start sending in the background."""
        self._instance = ClientInstance.get(self.client_config)
        await self._instance.start()
        options = ProducerOptions(self.producer_group, send_timeout_ms=self.settings.send_timeout_ms,
                                  retry_times_when_send_failed=1, max_message_size=self.settings.message_max_bytes)
        self._core = ProducerCore(options, self._instance)
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._accepting = True
        self._task = self._loop.create_task(self._run(), name=f"trace-{self.producer_group}")

    async def close(self) -> None:
        """Send what is buffered (within the send timeout), then leave the client instance."""
        task, self._task = self._task, None
        if task is None:
            return
        with self._lock:
            self._accepting = False
        assert self._wake is not None and self._instance is not None
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), self.settings.send_timeout_ms / 1000)
        except asyncio.TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            log.warning("trace %s: %d record(s) not sent at shutdown", self.producer_group, self.stats().buffered)
        await self._instance.shutdown()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.settings.flush_interval_ms / 1000)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            await self._send_buffered()
            if not self._accepting and not self._buffer:
                return

    async def _send_buffered(self) -> None:
        with self._lock:
            records = list(self._buffer)
            self._buffer.clear()
        for data, keys, count in pack(records, self.settings.message_max_bytes):
            await self._send(data, keys, count)

    async def _send(self, data: str, keys: list[str], count: int) -> None:
        assert self._core is not None
        try:
            await self._core.send(self._core.prepare(Message.of(self.settings.topic, data, keys=keys)))
        except Exception as exc:  # noqa: BLE001 - tracing must never fail the client; counted and logged
            with self._lock:
                self._failed += count
                failed = self._failed
            if failed == count or failed // FAILURE_LOG_EVERY != (failed - count) // FAILURE_LOG_EVERY:
                log.warning("trace %s: sending %d record(s) to %s failed (%d failed so far): %s",
                            self.producer_group, count, self.settings.topic, failed, exc)
            return
        with self._lock:
            self._sent += count
