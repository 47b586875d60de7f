"""The listening side: accepts connections and serves requests by code.

A server also talks back: the broker keeps the `Connection` objects its
clients arrived on and calls `request`/`send_oneway` on them.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Mapping

from skiff.common.limits import CONNECTION_WRITE_HIGH_BYTES
from skiff.common.service import Periodic
from skiff.transport.connection import CloseListener, CloseReason, Connection, Handler
from skiff.transport.errors import ListenError
from skiff.transport.tls import ServerTls, SniffingListener, listen_socket

log = logging.getLogger(__name__)

CLOSE_LOG_LEVELS = {
    CloseReason.PEER_CLOSED: logging.DEBUG,  # every CLI command and client shutdown: routine
    CloseReason.SHUTDOWN: logging.DEBUG,
    CloseReason.LOCAL_CLOSE: logging.DEBUG,
    CloseReason.IDLE_TIMEOUT: logging.INFO,  # a client went silent: worth a line, not an alarm
}
"""How loud a closed connection is logged; the failures (malformed frames, socket and write
errors) are WARNING, as they may need an operator."""
IDLE_CHECKS_PER_TIMEOUT = 4
"""The idle scan runs this many times per idle timeout, so a connection closes
at most a quarter of the timeout late."""


class RemotingServer:
    """Serve ``handlers`` on ``host:port`` (port 0 picks a free one; see `port`)."""

    def __init__(
        self,
        host: str,
        port: int,
        handlers: Mapping[int, Handler],
        *,
        on_connection_close: CloseListener | None = None,
        idle_timeout_s: float | None = None,
        write_high_bytes: int = CONNECTION_WRITE_HIGH_BYTES,
        tls: ServerTls | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._handlers = dict(handlers)
        self._on_connection_close = on_connection_close
        self._idle_timeout_s = idle_timeout_s
        self._write_high_bytes = write_high_bytes
        self._tls = tls
        """None serves plaintext only; else TLS by its mode (docs/tls.md)."""
        self._server: asyncio.Server | SniffingListener | None = None
        self._connections: set[Connection] = set()
        self._idle_scan: Periodic | None = None

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The bound port once started (the real one when asked for port 0)."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    @property
    def connections(self) -> tuple[Connection, ...]:
        return tuple(self._connections)

    async def start(self) -> None:
        """Listen; raises `ListenError` saying why when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        try:
            if self._tls is None:
                self._server = await loop.create_server(
                    self._new_connection, self._host, self._port, reuse_address=True, backlog=1024
                )
            else:
                self._server = SniffingListener(listen_socket(self._host, self._port, 1024), self._tls,
                                                self._make_connection, self._track)
        except OSError as exc:
            why = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise ListenError(f"cannot listen on {self._host}:{self._port}: {why}") from exc
        if self._idle_timeout_s:
            self._idle_scan = Periodic("idle-connections", self._idle_timeout_s / IDLE_CHECKS_PER_TIMEOUT,
                                       self._close_idle)
            self._idle_scan.start()

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Stop accepting, let running handlers answer, then close every connection.

        Handlers still running after ``drain_timeout_s`` are cancelled, and
        connections whose output does not flush by then are aborted.
        """
        if self._server is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_timeout_s
        self._server.close()
        if self._idle_scan is not None:
            await self._idle_scan.stop()
        connections = list(self._connections)
        for conn in connections:
            conn.stop_reading()
        await _wait_until(deadline, [conn.wait_handlers() for conn in connections])
        for conn in connections:
            conn.cancel_handlers()
            conn.close(CloseReason.SHUTDOWN)
        await _wait_until(deadline, [conn.wait_closed() for conn in connections])
        for conn in connections:
            if not conn.socket_closed:
                conn.close(CloseReason.SHUTDOWN, abort=True)
        await self._server.wait_closed()
        self._server = None

    def _new_connection(self) -> Connection:
        conn = self._make_connection()
        self._track(conn)
        return conn

    def _make_connection(self) -> Connection:
        return Connection(self._handlers, serving=True, write_high_bytes=self._write_high_bytes)

    def _track(self, conn: asyncio.Protocol) -> None:
        assert isinstance(conn, Connection)
        self._connections.add(conn)
        conn.add_close_listener(self._closed)

    def _closed(self, conn: Connection, reason: CloseReason) -> None:
        self._connections.discard(conn)
        level = CLOSE_LOG_LEVELS.get(reason, logging.WARNING)
        log.log(level, "connection from %s closed: %s%s", conn.peer_addr, reason.value,
                f" ({conn.close_detail})" if conn.close_detail else "")
        if self._on_connection_close is not None:
            self._on_connection_close(conn, reason)

    def _close_idle(self) -> None:
        assert self._idle_timeout_s is not None
        for conn in list(self._connections):
            if conn.idle_s > self._idle_timeout_s:
                conn.close(CloseReason.IDLE_TIMEOUT, f"silent for {conn.idle_s:.0f} s")


async def _wait_until(deadline: float, waits: list[Awaitable[None]]) -> None:
    """Run ``waits`` together until all finish or the loop clock passes ``deadline``."""
    if not waits:
        return
    tasks = [asyncio.ensure_future(w) for w in waits]
    timeout = max(0.0, deadline - asyncio.get_running_loop().time())
    _, not_done = await asyncio.wait(tasks, timeout=timeout)
    for task in not_done:
        task.cancel()
    await asyncio.gather(*not_done, return_exceptions=True)
