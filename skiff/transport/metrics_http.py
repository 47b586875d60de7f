"""MetricsHttpServer: ``GET /metrics`` in Prometheus text format, served on the event loop.

Served by asyncio on the server's own loop, not by prometheus_client's HTTP thread:
collectors then read the broker's tables (offsets, clients, counters) on the thread
that changes them, with no locks on the request path. One scrape holds the loop for
as long as its collectors take (a broker with thousands of queues: milliseconds).

Only ``GET /metrics`` (and ``/``) answers 200; anything else is 404 or 405, and a
request line longer than `REQUEST_MAX_BYTES` or slower than `READ_TIMEOUT_S` closes
the connection.
"""

from __future__ import annotations

import asyncio
import errno
import logging

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from skiff.transport.errors import ListenError

log = logging.getLogger(__name__)

REQUEST_MAX_BYTES = 8192
READ_TIMEOUT_S = 10.0


class MetricsHttpServer:
    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        self.host = host
        self._port = port
        self.registry = registry
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    def url(self, advertised_host: str) -> str:
        return f"http://{advertised_host}:{self.port}/metrics"

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self._port, reuse_address=True)
        except OSError as exc:
            why = "address already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise ListenError(f"cannot serve metrics on {self.host}:{self._port}: {why}") from exc

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, body, ctype = self._answer(head)
            writer.write(b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % (status, ctype, len(body)) + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[bytes, bytes, bytes]:
        if len(head) > REQUEST_MAX_BYTES:
            return b"431 Request Header Fields Too Large", b"request too large\n", b"text/plain"
        method, _, rest = head.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method != b"GET":
            return b"405 Method Not Allowed", b"only GET\n", b"text/plain"
        if path not in (b"/metrics", b"/"):
            return b"404 Not Found", b"see /metrics\n", b"text/plain"
        return b"200 OK", generate_latest(self.registry), CONTENT_TYPE_LATEST.encode()
