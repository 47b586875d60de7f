"""The dialling side: one connection per address, opened on first use and again
after it closes, with handlers for the requests servers send back.

Its connections are `ClientConnection`s: a `Connection` with the request path of a
single send cut short (a producer sends one message per request, so the transport's
own work per request is a large part of the client's CPU per send; docs/performance.md,
"Our client's CPU per single send, second round")."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Iterable, Mapping

from skiff.common import kernels
from skiff.common.errors import ConfigError
from skiff.common.limits import FRAME_MAX_BYTES
from skiff.common.record import parse_host_port
from skiff.protocol.codes import SKIFF_VERSION, SerializeType
from skiff.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from skiff.protocol.frame import json_head_py
from skiff.transport.connection import CloseListener, CloseReason, Connection, Handler
from skiff.protocol.errors import ConnectionClosed, RequestTimeout
from skiff.transport.errors import ConnectFailed
from skiff.transport.tls import TlsClientConfig, client_context

log = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_MS = 3000
"""RocketMQ's `connectTimeoutMillis`."""

CLOSE_WAIT_S = 1.0
"""How long `RemotingClient.close` waits for sockets to finish closing."""


WRITE_EVERY_REQUESTS = 32
"""A connection's requests go to the socket at least every this many, not only at the end of the
loop step that made them. A producer with 64 sends in flight makes its next 64 requests in the
step that reads the 64 answers; written all at once, the broker then works while the client
waits and the other way round. Writing the first 32 as soon as they are made lets the broker
store them while the client makes the rest (two halves of the window in turn, both processes
busy). Fewer requests per step are written at its end, as before."""

_JSON = int(SerializeType.JSON)
_json_head = kernels.select("json_head", json_head_py, "skiff.protocol._frames")


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6 host]:port`` too); `ConfigError` names a bad one."""
    try:
        host, port = parse_host_port(addr.strip())
    except ValueError:
        host, port = "", 0
    if not host or not 0 < port < 65536:
        raise ConfigError(f"{addr!r} is not a host:port address")
    return host, port


class ClientConnection(Connection):
    """The dialling side's `Connection`, with a single send's request path cut short.

    `request_json` sends a request given by its fields: its frame's header is written in one
    kernel call, with no `RemotingCommand` made and encoded, and a run of such requests goes
    to the socket every `WRITE_EVERY_REQUESTS`. The answers one read brings
    resolve their requests' futures in one pass, without the dispatch loop that requests
    from the server go through. Anything out of the ordinary (the connection closed or not
    open yet, too many requests pending, a frame over the limit) goes through
    `Connection.request`, which raises what it raises.
    """

    _unwritten = 0
    """Requests `request_json` queued since it last had them written (`WRITE_EVERY_REQUESTS`)."""

    def request_json(self, code: int, language: str, ext: dict[str, str], body: bytes,
                     timeout_ms: int) -> asyncio.Future[RemotingCommand]:
        """``request(RemotingCommand(code, ext_fields=ext, body=body, language=language), timeout_ms)``:
        the same frame, opaque, timeout and errors; ``ext``'s keys and values are strings."""
        pending = self._pending
        if self.close_reason is None and self._transport is not None and len(pending) < self._max_pending:
            opaque = self._next_opaque()
            args = (_JSON, code, language, SKIFF_VERSION, opaque, 0, None, ext, len(body))
            head = _json_head(*args)
            if head is None:  # what the kernel does not write: the reference's bytes, or its error
                head = json_head_py(*args)
            if head is not None and len(head) + len(body) <= FRAME_MAX_BYTES:
                future = self._send_awaiting([head, body], opaque, code, timeout_ms)
                self._unwritten += 1
                if self._unwritten >= WRITE_EVERY_REQUESTS:
                    self._unwritten = 0
                    self._output.write([], True)  # now, unless the connection is handling a batch
                return future
        return self.request(RemotingCommand(code, ext_fields=ext, body=body, language=language), timeout_ms)

    def _dispatch(self, commands: Iterable[RemotingCommand]) -> None:
        """A read's answers resolve their futures in one pass; from the first request on (a
        server asking this side something), `Connection`'s dispatch takes the rest."""
        if type(commands) is not list or self.close_reason is not None or self._read_paused:
            super()._dispatch(commands)
            return
        on_response = self._on_response
        for i, cmd in enumerate(commands):
            if not cmd.flag & RPC_TYPE_RESPONSE:
                super()._dispatch(commands[i:])
                return
            on_response(cmd)


class RemotingClient:
    """Requests to many addresses over one connection each.

    ``handlers`` answer requests a server sends on those connections
    (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...).
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler] | None = None,
        *,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        on_connection_close: CloseListener | None = None,
        tls: TlsClientConfig | None = None,
    ) -> None:
        self._handlers = dict(handlers or {})
        self._ssl = client_context(tls) if tls is not None else None
        """None dials plaintext; else every connection starts with a TLS handshake (docs/tls.md)."""
        self._connect_timeout_ms = connect_timeout_ms
        self._on_connection_close = on_connection_close
        self._connections: dict[str, ClientConnection] = {}
        self._connecting: dict[str, asyncio.Future[ClientConnection]] = {}
        self._closed = False

    @property
    def connections(self) -> dict[str, ClientConnection]:
        """Open connections by address (a copy)."""
        return dict(self._connections)

    async def connection(self, addr: str) -> ClientConnection:
        """The open connection to ``addr``, dialling it if there is none.

        Concurrent callers share one connect attempt; a failed one raises
        `ConnectFailed` (retriable) and the next call dials again.
        """
        conn = self._connections.get(addr)
        if conn is not None and not conn.is_closed:
            return conn
        if self._closed:
            raise ConnectionClosed(addr, "the remoting client is closed")
        attempt = self._connecting.get(addr)
        if attempt is None:
            attempt = asyncio.ensure_future(self._dial(addr))
            self._connecting[addr] = attempt
            attempt.add_done_callback(lambda _: self._connecting.pop(addr, None))
        return await asyncio.shield(attempt)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return the response; the timeout covers the connect."""
        conn = self._connections.get(addr)
        if conn is None or conn.is_closed:
            loop = asyncio.get_running_loop()
            started = loop.time()
            conn = await self.connection(addr)
            remaining_ms = timeout_ms - int((loop.time() - started) * 1000)
            if remaining_ms <= 0:
                raise RequestTimeout(cmd.code, addr, timeout_ms)
            return await conn.request(cmd, remaining_ms)
        return await conn.request(cmd, timeout_ms)

    def request_json(self, addr: str, code: int, language: str, ext: dict[str, str], body: bytes,
                     timeout_ms: int) -> Awaitable[RemotingCommand]:
        """``invoke(addr, RemotingCommand(code, ext_fields=ext, body=body, language=language), timeout_ms)``
        to await, without a coroutine while the connection is open (`ClientConnection.request_json`:
        the request is written now); a connection to dial first makes it that coroutine."""
        conn = self._connections.get(addr)
        if conn is not None and conn.close_reason is None:
            return conn.request_json(code, language, ext, body, timeout_ms)
        return self.invoke(addr, RemotingCommand(code, ext_fields=ext, body=body, language=language), timeout_ms)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        (await self.connection(addr)).send_oneway(cmd)

    def close_connection(self, addr: str) -> None:
        """Close the connection to ``addr`` (the next call dials again)."""
        conn = self._connections.pop(addr, None)
        if conn is not None:
            conn.close(CloseReason.LOCAL_CLOSE)

    async def close(self) -> None:
        """Close every connection; later calls raise `ConnectionClosed`."""
        self._closed = True
        for attempt in list(self._connecting.values()):
            attempt.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            conn.close(CloseReason.LOCAL_CLOSE)
        if connections:
            await asyncio.wait([asyncio.ensure_future(c.wait_closed()) for c in connections], timeout=CLOSE_WAIT_S)

    async def _dial(self, addr: str) -> ClientConnection:
        host, port = parse_addr(addr)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_ms / 1000.0):
                _, conn = await loop.create_connection(
                    lambda: ClientConnection(self._handlers, serving=False), host, port, ssl=self._ssl,
                    ssl_handshake_timeout=self._connect_timeout_ms / 1000.0 if self._ssl else None,
                )
        except TimeoutError:
            raise ConnectFailed(addr, f"no connection within {self._connect_timeout_ms} ms") from None
        except ConnectionRefusedError as exc:
            raise ConnectFailed(addr, exc.strerror or str(exc)) from None
        except OSError as exc:
            if self._ssl is not None and isinstance(exc, (ssl.SSLError, ConnectionError)):  # the server closed or garbled the handshake, or refused our certificate
                detail = getattr(exc, "reason", None) or exc.strerror or "the server closed the connection"
                raise ConnectFailed(addr, f"TLS handshake failed: {detail} (does the server serve TLS? "
                                          f"tls.server.mode)") from None
            raise ConnectFailed(addr, exc.strerror or str(exc)) from None
        if self._closed:
            conn.close(CloseReason.LOCAL_CLOSE)
            raise ConnectionClosed(addr, "the remoting client is closed")
        conn.add_close_listener(lambda c, reason: self._forget(addr, c, reason))
        self._connections[addr] = conn
        log.debug("connected to %s from %s", addr, conn.local_addr)
        return conn

    def _forget(self, addr: str, conn: Connection, reason: CloseReason) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]
        log.debug("connection to %s closed: %s", addr, reason.value)
        if self._on_connection_close is not None:
            self._on_connection_close(conn, reason)
