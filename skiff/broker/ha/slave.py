"""The slave's side of classic HA: follow the master's CommitLog over its HA port.

The master's HA address is ``haMasterAddress``, else the one the NameServer
answered to this broker's registration (`HASlave.set_master`). The slave
reports its max physical offset, appends what the master streams (whole
records only: a `RecordAssembler` holds a record cut by a frame boundary until
its rest arrives) through `MessageStore.append_replicated`, which dispatches it
into ConsumeQueues and the index as the master's appends are, and reports again.
While idle it re-reports every ``haSendHeartbeatInterval``; a master silent for
``haHousekeepingInterval`` is dropped and reconnected. A frame that does not
continue the slave's CommitLog drops the connection (RocketMQ's "master pushed
offset not equal" check).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from skiff.broker.config import BrokerConfig
from skiff.common.errors import DecodeError
from skiff.common.record import parse_host_port
from skiff.common.service import Service
from skiff.protocol.ha import FrameReader, RecordAssembler, encode_report
from skiff.store import MessageStore

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
RETRY_S = 1.0
"""Pause before reconnecting (RocketMQ: 5 s); short, as a slave behind loses nothing by trying."""


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
        self.local_addr = ""
        """This end of the HA connection (controller mode publishes it: the master names
        its slaves' connections by it)."""

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
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 3.0)
        except (OSError, asyncio.TimeoutError) as exc:
            log.debug("cannot connect to the master's HA port %s: %s", addr, exc)
            return
        self._writer = writer
        self.connected = True
        sockname = writer.get_extra_info("sockname")
        self.local_addr = f"{sockname[0]}:{sockname[1]}" if sockname else ""
        self._on_connect()
        log.info("following the master at %s from offset %d", addr, self.store.max_physical_offset)
        try:
            why = await self._follow(reader, writer)
        except (OSError, asyncio.IncompleteReadError) as exc:
            why = f"connection lost: {exc}"
        finally:
            self.connected = False
            self._writer = None
            self.local_addr = ""
            writer.transport.abort()
        log.warning("stopped following the master at %s: %s", addr, why)

    async def _follow(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        cfg = self.config
        heartbeat_s = cfg.ha_send_heartbeat_interval_ms / 1000
        housekeeping_s = cfg.ha_housekeeping_interval_ms / 1000
        frames = FrameReader()
        assembler: RecordAssembler | None = None
        writer.write(encode_report(self.store.max_physical_offset))
        last_read = time.monotonic()
        while not self.stopping:
            try:
                data = await asyncio.wait_for(reader.read(READ_CHUNK), heartbeat_s)
            except asyncio.TimeoutError:
                if time.monotonic() - last_read > housekeeping_s:
                    return f"nothing read for {housekeeping_s:g} s (haHousekeepingInterval)"
                writer.write(encode_report(self.store.max_physical_offset))
                continue
            if not data:
                return "the master closed the connection"
            last_read = time.monotonic()
            if self._paused:
                return "paused for an election"
            try:
                assembler = self._apply(frames, assembler, data)
            except (DecodeError, ValueError, OSError) as exc:
                return str(exc)
            writer.write(encode_report(self.store.max_physical_offset))
            await writer.drain()
        return "stopping"

    def _apply(self, frames: FrameReader, assembler: RecordAssembler | None, data: bytes) -> RecordAssembler | None:
        """Append the whole records that ``data`` completes; return the assembler."""
        runs: list[bytes] = []
        start = -1
        for frame in frames.feed(data):
            if assembler is None:
                assembler = self._assembler(frame.offset)
            offset, whole = assembler.feed(frame.offset, frame.body)
            self.last_frame_offset = frame.offset + len(frame.body)
            if whole:
                start = offset if start < 0 else start
                runs.append(whole)
        if runs:
            self.store.append_replicated(b"".join(runs), start)
        return assembler

    def _assembler(self, offset: int) -> RecordAssembler:
        mine = self.store.max_physical_offset
        if mine and offset != mine:
            raise DecodeError(f"the master pushed offset {offset}, not this slave's max offset {mine}")
        return RecordAssembler(self.store.config.mapped_file_size_commit_log, offset)

    async def stop(self, timeout_s: float = 5.0) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        await super().stop(timeout_s)
