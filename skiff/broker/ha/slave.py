"""The slave's side of classic HA: follow the master's CommitLog over its HA port.

The master's HA address is ``haMasterAddress``, else the one the NameServer
answered to this broker's registration (`HASlave.set_master`). The slave
reports its max physical offset, appends what the master streams through
`MessageStore.append_replicated` (whole records only: a record cut by a frame
boundary waits in `Received` until its rest arrives), which checks and dispatches
it into ConsumeQueues and the index as the master's appends are, and reports again.
Reads are pushed (`PushFeed`, as on the master's side): each read is one append and
one report, made in the protocol's callback, with no task woken, timer made or
drain awaited per read. Frame bodies are zero-copy slices of the read, copied once
into `Received` and once into the CommitLog.
Only after ``haSendHeartbeatInterval`` with nothing read does it re-report (a
heartbeat); a master silent for ``haHousekeepingInterval`` is dropped and
reconnected. A frame that does not continue the slave's CommitLog drops the
connection (RocketMQ's "master pushed offset not equal" check).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.feed import PushFeed
from skiff.broker.ha.tls import SlaveTls
from skiff.common.errors import DecodeError
from skiff.common.record import parse_host_port
from skiff.common.service import Service
from skiff.protocol.ha import FrameReader, encode_report
from skiff.store import MessageStore
from skiff.transport.tls import handshake_failure

log = logging.getLogger(__name__)

RETRY_S = 1.0
"""Pause before reconnecting (RocketMQ: 5 s); short, as a slave behind loses nothing by trying."""

CONNECT_TIMEOUT_S = 3.0
"""How long a connection to the master's HA port (and its TLS handshake) may take."""

PLAINTEXT_REFUSED_HINT = (" before sending anything: if its HA port serves TLS only (tls.server.mode=enforcing), "
                          "this slave must dial it with TLS (tls.enable=true; docs/tls.md)")
"""Added to why a plaintext connection ended when the master closed it at once."""


class HASlave(Service):
    name = "ha-slave"

    def __init__(self, config: BrokerConfig, store: MessageStore, *,
                 on_connect: Callable[[], None] = lambda: None) -> None:
        """``on_connect`` runs on each (re)connection (the metadata sync starts a round)."""
        super().__init__()
        self._on_connect = on_connect
        self.config = config
        self.store = store
        self.master_ha_addr = config.ha_master_address
        self.connected = False
        self.last_frame_offset = -1
        """Where the master's last frame ended: how far the master has sent."""
        self._writer: asyncio.StreamWriter | None = None
        self._paused = False
        self._resume_addr = ""
        self.last_drop = ""
        """Why the last connection to the master ended (logged too; tests read it)."""
        self.local_addr = ""
        """This end of the HA connection (controller mode publishes it: the master names
        its slaves' connections by it)."""
        self._tls = SlaveTls(config)
        self._tls_failure = ""
        """The last TLS failure logged as a warning (repeats, one per retry, go to debug)."""

    def runtime_table(self) -> dict[str, str]:
        return {
            "haMasterAddr": self.master_ha_addr or "",
            "haConnected": "true" if self.connected else "false",
            "haMasterSentOffset": str(self.last_frame_offset),
        }

    def pause(self) -> None:
        """Stop following (before an election): nothing more is appended until `resume` or
        `follow`, so the max offset read next is final."""
        if not self._paused:
            self._paused = True
            self._resume_addr = self.master_ha_addr
        self.master_ha_addr = ""
        self._drop()

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            self.master_ha_addr = self._resume_addr

    def follow(self, ha_addr: str) -> None:
        """Follow the master at ``ha_addr`` (controller mode: etcd names it)."""
        self._paused = False
        if ha_addr != self.master_ha_addr:
            log.info("following the master's HA port at %s", ha_addr)
            self.master_ha_addr = ha_addr
            self._drop()

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()

    def set_master(self, ha_addr: str | None) -> None:
        """The NameServer's answer names the master's HA address (unless haMasterAddress is set)."""
        if self.config.ha_master_address or not ha_addr or ha_addr == self.master_ha_addr:
            return
        log.info("the master's HA address is %s", ha_addr)
        self.master_ha_addr = ha_addr
        if self._writer is not None:
            self._writer.transport.abort()

    async def run(self) -> None:
        while not self.stopping:
            addr = self.master_ha_addr
            if addr:
                await self._session(addr)
            if not await self.sleep(RETRY_S):
                return

    async def _session(self, addr: str) -> None:
        host, port = parse_host_port(addr)
        loop = asyncio.get_running_loop()
        feed = PushFeed("the master")
        context = self._tls.context()
        tls: dict[str, Any] = {} if context is None else {"ssl": context,
                                                          "ssl_handshake_timeout": CONNECT_TIMEOUT_S}
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: asyncio.StreamReaderProtocol(feed), host, port, **tls),
                CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            self._connect_failed(addr, exc, context is not None)
            return
        self._tls_failure = ""
        writer = asyncio.StreamWriter(transport, protocol, feed, loop)
        self._writer = writer
        self.connected = True
        sockname = writer.get_extra_info("sockname")
        self.local_addr = f"{sockname[0]}:{sockname[1]}" if sockname else ""
        self._on_connect()
        log.info("following the master at %s%s from offset %d", addr, " over TLS" if context else "",
                 self.store.max_physical_offset)
        try:
            why = await self._follow(feed, writer)
        finally:
            self.connected = False
            self._writer = None
            self.local_addr = ""
            writer.transport.abort()
        if context is None and not feed.heard and not self.stopping and not self._paused:
            why += PLAINTEXT_REFUSED_HINT
        self.last_drop = why
        log.warning("stopped following the master at %s: %s", addr, why)

    def _connect_failed(self, addr: str, exc: BaseException, tls: bool) -> None:
        """A master that is down is routine (debug: the slave retries every second); a failed TLS
        handshake is a configuration to fix, logged as a warning once per reason."""
        if not tls or isinstance(exc, (ConnectionRefusedError, asyncio.TimeoutError)):
            log.debug("cannot connect to the master's HA port %s: %s", addr, exc)
            return
        why = handshake_failure(exc)
        self.last_drop = f"TLS handshake failed: {why}"
        level = logging.DEBUG if why == self._tls_failure else logging.WARNING
        self._tls_failure = why
        log.log(level, "cannot connect to the master's HA port %s over TLS: %s (does the master serve TLS there, "
                "tls.server.mode, and does this slave's trust hold its certificate chain: tls.client.trustCertPath, "
                "else tls.server.certPath?)", addr, why)

    async def _follow(self, feed: PushFeed, writer: asyncio.StreamWriter) -> str:
        """Each read is applied and answered with a report in the protocol's callback.
        Reports are 8 bytes, one per read: never drained, the socket takes them."""
        frames = FrameReader()
        received: Received | None = None

        def on_data(data: bytes) -> None:
            nonlocal received
            if feed.ended.done():
                return
            if self._paused:
                return feed.end("paused for an election")
            try:
                received = self._apply(frames, received, data)
            except (DecodeError, ValueError, OSError) as exc:
                return feed.end(str(exc))
            writer.write(encode_report(self.store.max_physical_offset))
        writer.write(encode_report(self.store.max_physical_offset))
        feed.start(on_data)
        return await self._watch(feed, writer)

    async def _watch(self, feed: PushFeed, writer: asyncio.StreamWriter) -> str:
        """Wake only when the stream ends, to stop, or after ``haSendHeartbeatInterval`` of
        silence (then report alone: a heartbeat); drop a master silent for
        ``haHousekeepingInterval``. Returns why the connection ends."""
        heartbeat_s = self.config.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = self.config.ha_housekeeping_interval_ms / 1000
        loop = asyncio.get_running_loop()
        reported = loop.time()
        while not self.stopping:
            now = loop.time()
            if now - feed.last_read >= housekeeping_s:
                return f"nothing read for {housekeeping_s:g} s (haHousekeepingInterval)"
            quiet_since = max(feed.last_read, reported)
            if now - quiet_since >= heartbeat_s:
                writer.write(encode_report(self.store.max_physical_offset))
                reported = quiet_since = now
            wake = min(quiet_since + heartbeat_s, feed.last_read + housekeeping_s)
            await asyncio.wait([feed.ended], timeout=wake - now)
            if self.stopping:
                break
            if self._paused:
                return "paused for an election"
            if feed.ended.done():
                return feed.ended.result()
        return "stopping"

    def _apply(self, frames: FrameReader, received: Received | None, data: bytes) -> Received | None:
        """Append the whole records that ``data`` completes; return what holds the rest."""
        for frame in frames.feed(data):
            if received is None:
                received = self._received_from(frame.offset)
            received.add(frame.offset, frame.body)
            self.last_frame_offset = frame.offset + len(frame.body)
        if received is not None:
            received.append_to(self.store)
        return received

    def _received_from(self, offset: int) -> Received:
        mine = self.store.max_physical_offset
        if mine and offset != mine:
            raise DecodeError(f"the master pushed offset {offset}, not this slave's max offset {mine}")
        return Received(offset)

    async def stop(self, timeout_s: float = 5.0) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        await super().stop(timeout_s)


class Received:
    """CommitLog bytes received and not yet appended: the front of a record that a frame
    cut, waiting for its rest."""

    def __init__(self, start: int) -> None:
        self.start = start
        self._buf = bytearray()

    @property
    def end(self) -> int:
        """The offset the stream must continue from."""
        return self.start + len(self._buf)

    def add(self, offset: int, body: memoryview) -> None:
        if offset != self.end:
            raise DecodeError(f"the master sent offset {offset}, the slave expects {self.end}")
        self._buf += body

    def append_to(self, store: MessageStore) -> None:
        """Append the whole records held; keep the cut one."""
        if self._buf:
            end = store.append_replicated(self._buf, self.start, hold_partial=True)
            del self._buf[: end - self.start]
            self.start = end
