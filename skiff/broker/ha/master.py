"""The master's side of classic HA: a raw TCP server on ``haListenPort`` streaming the
CommitLog to every slave that connects (`skiff.protocol.ha` has the byte layouts).

Per slave, frames are written from a callback run once per loop step in which the
CommitLog grew (all the step's appends share a frame; a task wakes only to wait
for a slow slave's socket to drain); its offset reports are handled as they
arrive, in the protocol's callback (`PushFeed`: no task wakes up per report), and
one watcher task per slave closes it after ``haHousekeepingInterval`` of silence. The first
report says where to start: that offset, or for an empty slave (0) the start of
the master's last CommitLog file, as RocketMQ does. Frames are zero-copy slices
of the mapped CommitLog, at most ``haTransferBatchSize`` bytes, never past a
file end. An idle connection gets an empty frame every
``haSendHeartbeatInterval``; one that says nothing for ``haHousekeepingInterval``
is closed, as is one that acknowledges more than the master holds (a fake ack
would otherwise answer SYNC_MASTER sends). Acknowledgements feed the
`ReplicaWaiters` that SYNC_MASTER sends wait on.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from typing import NamedTuple

from skiff.broker.config import BrokerConfig, BrokerRole
from skiff.broker.ha.feed import PushFeed
from skiff.broker.ha.tls import ha_port_tls_note
from skiff.broker.ha.waiters import Done, ReplicaWaiters
from skiff.common.errors import DecodeError
from skiff.common.limits import HA_LISTEN_BACKLOG, HA_SLAVE_GONE_GRACE_S
from skiff.protocol.ha import ReportReader, encode_frame_head
from skiff.store import MessageStore, PutStatus
from skiff.transport.errors import ListenError
from skiff.transport.tls import SniffingListener, listen_socket, starts_tls

log = logging.getLogger(__name__)


class SlaveInfo(NamedTuple):
    """What the master knows of one connected slave (admin and `skiff cluster list`)."""

    addr: str
    acked: int
    sent: int


class HAMaster:
    def __init__(self, config: BrokerConfig, store: MessageStore, host: str, port: int) -> None:
        self.config = config
        self.store = store
        self.host = host
        self.port = port
        self.waiters = ReplicaWaiters(config.slave_timeout_ms / 1000)
        self.connections: set[SlaveConnection] = set()
        self.sync_members: set[int] | None = set() if config.enable_controller_mode else None
        self._caught_up_at: dict[int, float] = {}
        self._gone_at: dict[int, float] = {}
        """Slave id → when its last connection closed (`caught_up`)."""
        """Controller mode: the SyncStateSet's slaves; None: classic HA."""
        self._server: asyncio.Server | SniffingListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._send_soon = False

    async def start(self, *, any_port_if_taken: bool = False) -> None:
        """Listen. ``any_port_if_taken``: the port was derived (listenPort + 1), not configured,
        so a free one will do if it is taken (the NameServer tells slaves the real one)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        try:
            self._server = await self._listen(self.port)
        except OSError as exc:
            why = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            if not any_port_if_taken:
                raise ListenError(f"haListenPort: cannot listen on {self.host}:{self.port}: {why}") from exc
            log.warning("HA port %d (listenPort + 1) is taken (%s): using a free port", self.port, why)
            self._server = await self._listen(0)
        self.port = self._server.sockets[0].getsockname()[1]
        self.store.add_append_listener(self._appended)
        log.info("HA service listening on %s:%d%s", self.host, self.port, ha_port_tls_note(self.config))

    async def _listen(self, port: int) -> asyncio.Server | SniffingListener:
        """Plaintext, or TLS by ``tls.server.mode`` (enforcing: TLS only; permissive: both, told
        apart by the first byte as on the remoting port: a slave's first report is an offset,
        whose first byte is 0x16 only past 2^60 bytes). The certificate is reloaded when its
        files change, as on the other doors."""
        tls = self.config.server_tls()
        if tls is None:
            return await asyncio.get_running_loop().create_server(self._protocol, self.host, port,
                                                                   reuse_address=True, backlog=HA_LISTEN_BACKLOG)
        return SniffingListener(listen_socket(self.host, port, HA_LISTEN_BACKLOG), tls, self._protocol,
                                lambda protocol: None, door=" to the HA port", answer_refused=False)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections):
            conn.close("the master is stopping")
        await asyncio.gather(*(c.done for c in list(self.connections)), return_exceptions=True)
        self.waiters.fail_all()
        await self._server.wait_closed()  # a TLS listener's certificate watch ends here
        self._server = None

    # -- SYNC_MASTER ----------------------------------------------------------

    def replicate(self, end: int, done: Done) -> PutStatus | None:
        """What a SYNC_MASTER send that wrote up to ``end`` waits for: SLAVE_NOT_AVAILABLE
        at once without a slave or with one ``haSlaveFallbehindMax`` behind, PUT_OK at once
        if a slave has it already, else None and ``done`` is called later (True:
        acknowledged, False: FLUSH_SLAVE_TIMEOUT).

        In controller mode every slave in the SyncStateSet must acknowledge; with none
        in it the master alone is the set, and the send is answered at once."""
        if self.sync_members is not None and not self.sync_members:
            return PutStatus.PUT_OK
        if not self.connections or end - self.waiters.acked >= self.config.ha_slave_fallbehind_max:
            return PutStatus.SLAVE_NOT_AVAILABLE
        return None if self.waiters.add(end, done) else PutStatus.PUT_OK

    # -- controller mode ------------------------------------------------------

    def set_sync_members(self, ids: set[int]) -> None:
        """Controller mode: the slaves whose acknowledgements SYNC_MASTER sends wait for."""
        self.sync_members = set(ids)
        self._ack_changed()

    def slave_ids(self, by_client_addr: dict[str, int]) -> None:
        """Name each connection by the slave that published its address."""
        for conn in self.connections:
            conn.slave_id = by_client_addr.get(conn.peer, conn.slave_id)

    def caught_up(self, window_s: float) -> set[int]:
        """Slaves that reached the master's end within ``window_s`` and are connected, or
        whose connection closed less than `HA_SLAVE_GONE_GRACE_S` ago (sends meanwhile are
        not answered SEND_OK, since it cannot acknowledge them, so it still has every one;
        past the grace it can acknowledge nothing more, and waiting out the window would
        hold every SYNC send for it)."""
        now = time.monotonic()
        connected = set()
        for c in self.connections:
            if c.slave_id is not None:
                connected.add(c.slave_id)
                self._caught_up_at[c.slave_id] = max(self._caught_up_at.get(c.slave_id, -1e9), c.caught_up_at)
        return {i for i, t in self._caught_up_at.items() if now - t <= window_s
                and (i in connected or now - self._gone_at.get(i, now) <= HA_SLAVE_GONE_GRACE_S)}

    def drop_all(self, why: str) -> None:
        """Close every slave's connection and answer every waiting send (stepping down)."""
        for conn in list(self.connections):
            conn.close(why)
        self.waiters.fail_all()
        self.sync_members = set()
        self._caught_up_at.clear()
        self._gone_at.clear()

    def _ack_changed(self) -> None:
        if self.sync_members is None:
            return
        acks = {c.slave_id: c.acked for c in self.connections if c.slave_id in self.sync_members}
        if self.sync_members and len(acks) == len(self.sync_members):
            self.waiters.ack(min(acks.values()))
            self._confirm(min(acks.values()))
        elif not self.sync_members:
            self._confirm(None)
        elif self.store.reader.visible_end is None:  # a member not heard from yet: nothing new is visible
            self._confirm(self.store.commitlog.write_pos)

    def _confirm(self, offset: int | None) -> None:
        """Controller mode, SYNC_MASTER: reads stop at what every member of the SyncStateSet has
        (None: the master alone is the set), so a reader is never shown a record that a
        successor elected from the set may not have (docs/reliability.md's bug)."""
        if self.config.broker_role is BrokerRole.SYNC_MASTER:
            self.store.set_visible_end(offset)

    @property
    def slaves(self) -> list[SlaveInfo]:
        return [SlaveInfo(c.peer, c.acked, c.next_offset) for c in self.connections]

    def runtime_table(self) -> dict[str, str]:
        slaves = self.slaves
        return {
            "haSlaveCount": str(len(slaves)),
            "haSlaveAckOffset": str(self.waiters.acked),
            "haSlaves": ";".join(f"{s.addr}@{s.acked}" for s in slaves),
            "haReplicaWaiters": str(len(self.waiters)),
        }

    # -- plumbing -------------------------------------------------------------

    def _appended(self, end: int) -> None:
        """Runs on every put, after its bytes are readable: the slaves are sent the new bytes at
        the end of the loop step, once for every put of the step. With no slave connected there
        is no one to send to (a connection reads the log before it first waits)."""
        if self._send_soon or not self.connections:
            return
        self._send_soon = True  # cleared before the bytes are read, so no put is missed
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._send_all)  # type: ignore[union-attr]
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._send_all)

    def _send_all(self) -> None:
        self._send_soon = False
        for conn in list(self.connections):
            try:
                conn.appended()
            except Exception as exc:  # one broken stream must not stop the others, nor go quiet
                log.exception("sending to slave %s failed", conn.peer)
                conn.close(f"sending failed: {exc}")

    def _protocol(self) -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(PushFeed("the slave"), self._accept)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert isinstance(reader, PushFeed)
        conn = SlaveConnection(self, reader, writer)
        self.connections.add(conn)
        log.info("slave %s connected to the HA service%s", conn.peer,
                 " over TLS" if writer.get_extra_info("ssl_object") is not None else "")
        try:
            await conn.run()
        finally:
            self.connections.discard(conn)
            if conn.slave_id is not None:
                self._gone_at[conn.slave_id] = time.monotonic()
            log.info("slave %s disconnected: %s", conn.peer, conn.why)

    def acknowledged(self, offset: int) -> None:
        if self.sync_members is None:
            self.waiters.ack(offset)  # classic: one slave is enough (RocketMQ 4.x)
        else:
            self._ack_changed()


class SlaveConnection:
    def __init__(self, master: HAMaster, reader: PushFeed, writer: asyncio.StreamWriter) -> None:
        self.master = master
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.wake = asyncio.Event()
        """Set to have the writing task wait for the socket to drain, or to end it (closing)."""
        self.acked = -1
        self.next_offset = -1
        self.slave_id: int | None = None
        self.caught_up_at = -1e9
        self._idle_end = -1
        """Where the stream stood the last time the sender had sent everything."""
        self.why = ""
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._first = asyncio.Event()
        self._closing = False
        self._loop = asyncio.get_running_loop()
        self._waiting = False
        """The sender sent everything and waits for appends (heartbeats are its to send then)."""
        self._batch = master.config.ha_transfer_batch_size
        self._last_sent = 0.0
        self._beat: asyncio.TimerHandle | None = None
        self._high = 0

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.writer.close()
            if not self.done.done():
                self.done.set_result(None)

    def close(self, why: str) -> None:
        if not self._closing:
            self._closing = True
            self.why = why
            self.writer.transport.abort()  # a stopped slave never drains what is buffered
            self.wake.set()

    async def _read(self) -> None:
        """Feeds the reports as they arrive; returns when the stream ends or stays silent
        for ``haHousekeepingInterval`` (one wake-up per interval, not per report)."""
        reports, feed = ReportReader(), self.reader
        loop = asyncio.get_running_loop()

        first = True

        def on_data(data: bytes) -> None:
            nonlocal first
            if self._closing:
                return
            if first and starts_tls(data):  # on a plaintext port (TLS ones sniff it away)
                return self.close("a TLS handshake: this HA port serves plaintext (tls.server.mode=disabled)")
            first = False
            try:
                offset = reports.feed(data)
            except DecodeError as exc:
                return self.close(str(exc))
            if offset is not None:
                self._report(offset)
        feed.start(on_data)
        timeout = self.master.config.ha_housekeeping_interval_ms / 1000
        while not self._closing:
            left = feed.last_read + timeout - loop.time()
            if left <= 0:
                return self.close(f"nothing read for {timeout:g} s (haHousekeepingInterval)")
            await asyncio.wait([feed.ended], timeout=left)
            if feed.ended.done():
                return self.close(feed.ended.result())

    def _report(self, offset: int) -> None:
        store = self.master.store
        if offset > store.max_physical_offset:
            self.close(f"the slave acknowledged offset {offset}, beyond the master's {store.max_physical_offset}")
            return
        if self.acked < 0:
            self._first.set()
        self.acked = offset
        if offset >= max(self._idle_end, 0) and offset >= store.max_physical_offset - self.master.config.ha_transfer_batch_size:
            self.caught_up_at = time.monotonic()
        self.master.acknowledged(offset)

    def _start_offset(self) -> int:
        store = self.master.store
        if self.acked > 0:
            return self.acked
        end = store.max_physical_offset
        return end - end % store.config.mapped_file_size_commit_log

    def appended(self) -> None:
        """The CommitLog grew: send the new bytes, unless the sender waits for the socket to drain."""
        if self._waiting:
            self._waiting = False
            self._send()

    def _send(self) -> None:
        """Write every frame ready; stop when all is sent (then wait for appends) or when the
        socket's buffer is over its high mark (then the writing task waits for it to drain)."""
        store, batch, transport = self.master.store, self._batch, self.writer.transport
        if self._closing or transport.is_closing():  # a lost connection: the reader side closes it
            return
        while True:
            body = store.read_raw(self.next_offset, batch)
            if body is None:  # nothing new (or the slave wants deleted bytes: heartbeats only)
                self._idle_end = self.next_offset
                self._waiting = True
                return
            transport.writelines((encode_frame_head(self.next_offset, len(body)), body))
            self._last_sent = self._loop.time()
            self.next_offset += len(body)
            if transport.get_write_buffer_size() >= self._high:
                self.wake.set()
                return

    async def _write(self) -> None:
        await self._first.wait()
        self.next_offset = self._start_offset()
        cfg = self.master.config
        heartbeat_s = cfg.ha_send_heartbeat_interval_ms / 1000
        store = self.master.store
        if self.next_offset < store.min_physical_offset:
            log.warning("slave %s wants offset %d, which this master deleted (its CommitLog starts at %d): it gets "
                        "heartbeats only; wipe its store to resync", self.peer, self.next_offset,
                        store.min_physical_offset)
        loop = self._loop
        self._last_sent = loop.time()
        self._beat = loop.call_later(heartbeat_s, self._heartbeat, loop, heartbeat_s)
        self._high = self.writer.transport.get_write_buffer_limits()[1]
        try:
            self._send()
            while not self._closing:
                await self.wake.wait()
                self.wake.clear()
                if not self._closing:
                    await self.writer.drain()
                    self._send()
        finally:
            self._beat.cancel()

    def _heartbeat(self, loop: asyncio.AbstractEventLoop, heartbeat_s: float) -> None:
        """An empty frame once nothing was sent for ``haSendHeartbeatInterval``: one timer per
        interval, not a timeout per idle wait (a round trip each message at moderate rates)."""
        now = loop.time()
        if self._closing:
            return
        if self._waiting and now - self._last_sent >= heartbeat_s * 0.999:
            self.writer.write(encode_frame_head(self.next_offset, 0))
            self._last_sent = now
        self._beat = loop.call_at(self._last_sent + heartbeat_s if self._waiting else now + heartbeat_s,
                                  self._heartbeat, loop, heartbeat_s)
