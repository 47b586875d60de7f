"""A gRPC server on Skiff's own asyncio transport and HTTP/2 codec (`skiff.protocol.h2`),
instead of grpcio's: grpcio's C core and its asyncio bridge cost 150-250 µs of CPU per
*empty* unary call (docs/performance.md), more than the whole budget of a SendMessage.

The shape is the remoting door's and the Kafka listener's: the frames of one read are
handled in one pass (`H2Server.feed`) and everything they answer leaves in one transport
write. A unary handler's coroutine is stepped right there (``coro.send(None)``): a call
answered without waiting pays no task; only one that suspends is finished by a task
(`_Resume`). Server-streaming handlers (async generators) and bidi handlers (an async
iterator of requests in) run as tasks; answers written from tasks in one loop step leave
in one write too.

A call's task is cancelled when the client resets its stream (a cancelled ReceiveMessage
long poll), when its ``grpc-timeout`` passes (DEADLINE_EXCEEDED), when the connection ends,
and when the server stops. Handlers get a `CallContext` with what grpcio's ServicerContext
gave them: ``invocation_metadata()``, ``peer()`` (``ipv4:host:port``), ``time_remaining()``.

TLS: served through `SniffingListener` (permissive takes TLS and plaintext on one port: an
HTTP/2 preface starts with "P", never 0x16), with ALPN "h2", which gRPC clients require.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import typing
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from skiff.protocol.h2 import frames
from skiff.protocol.h2 import grpc as g
from skiff.protocol.h2.connection import DATA_EVENT, ENDED, HEADERS_EVENT, RESET, Event, H2Server
from skiff.transport.errors import ListenError
from skiff.transport.tls import ServerTls, SniffingListener, listen_socket

log = logging.getLogger(__name__)
_BACKLOG = 100


class Kind(enum.Enum):
    UNARY = "unary"
    SERVER_STREAM = "server_stream"
    BIDI = "bidi"


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC: how its messages decode and encode, and its handler. UNARY: ``async (request,
    context) -> response``; SERVER_STREAM: ``(request, context) -> async iterator of responses``;
    BIDI: ``(async iterator of requests, context) -> async iterator of responses``."""

    kind: Kind
    decode: Callable[[bytes], Any]
    encode: Callable[[Any], bytes]
    handler: Callable[..., Any]


class CallContext:
    """What a handler may ask about its call (grpcio's ServicerContext's names)."""

    __slots__ = ("_metadata", "_peer", "deadline")

    def __init__(self, metadata: tuple[tuple[str, str | bytes], ...], peer: str, deadline: float | None) -> None:
        self._metadata = metadata
        self._peer = peer
        self.deadline = deadline
        """The loop time the call's ``grpc-timeout`` ends at; None: no deadline."""

    def invocation_metadata(self) -> tuple[tuple[str, str | bytes], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - asyncio.get_running_loop().time())


class _Resume:
    """Finishes a coroutine that was stepped once by hand and suspended on ``yielded``: awaited
    in a task, it hands the task what the coroutine waits for and passes the wake-ups (and a
    cancellation) back into it, as if the task had started it."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self._coro, self._yielded
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # noqa: B036 - a cancellation goes into the coroutine
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class _Call:
    __slots__ = ("stream_id", "method", "context", "reader", "task", "requests", "started", "timer", "headers_sent")

    def __init__(self, stream_id: int, method: Method, context: CallContext, reader: g.MessageReader) -> None:
        self.stream_id = stream_id
        self.method = method
        self.context = context
        self.reader = reader
        self.task: asyncio.Task[None] | None = None
        self.requests: asyncio.Queue[Any] | None = None
        """A bidi call's requests (`_END` last)."""
        self.started = False
        self.timer: asyncio.TimerHandle | None = None
        self.headers_sent = False


_END = object()


class GrpcConnection(asyncio.Protocol):
    """One client connection of a `GrpcServer`."""

    def __init__(self, server: GrpcServer) -> None:
        self.server = server
        self.h2 = H2Server()
        self.transport: asyncio.Transport | None = None
        self.peer = "ipv4:0.0.0.0:0"
        self.calls: dict[int, _Call] = {}
        self._reading = False
        self._write_due = False
        self._writable: asyncio.Future[None] | None = None

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)
        self.peer = _peer_text(self.transport.get_extra_info("peername"))
        self.server.connections.add(self)
        self.h2.start()
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        for call in list(self.calls.values()):
            self._cancel(call)
        self.calls.clear()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def data_received(self, data: bytes) -> None:
        self._reading = True
        try:
            for event in self.h2.feed(data):
                kind = event.kind
                if kind == DATA_EVENT:
                    self._data(event)
                elif kind == HEADERS_EVENT:
                    self._open(event)
                elif kind == RESET:
                    call = self.calls.pop(event.stream_id, None)
                    if call is not None:
                        self._cancel(call)
                elif kind == ENDED:
                    self.close()
        finally:
            self._reading = False
        self.flush()

    def close(self, code: int = frames.NO_ERROR) -> None:
        """GOAWAY, every call cancelled, the transport closed once what is queued is written."""
        self.h2.close(code)
        for call in list(self.calls.values()):
            self._cancel(call)
        self.calls.clear()
        self.flush()
        if self.transport is not None:
            self.transport.close()

    # -- writing -----------------------------------------------------------------------

    def flush(self) -> None:
        """Write what the codec holds, in one write."""
        self._write_due = False
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _write_soon(self) -> None:
        """Answers given by tasks in one loop step leave together, at its end."""
        if not self._reading and not self._write_due:
            self._write_due = True
            asyncio.get_running_loop().call_soon(self.flush)

    # -- calls -------------------------------------------------------------------------

    def _open(self, event: Event) -> None:
        stream_id = event.stream_id
        try:
            head = g.call_head(event.headers or ())
            method = self.server.methods.get(head.method) if head.service == self.server.service else None
            if method is None:
                raise g.GrpcError(g.UNIMPLEMENTED, f"method {head.service}/{head.method} is not served")
        except g.GrpcError as exc:
            self.h2.send_headers(stream_id, g.trailers_only(exc.code, str(exc)), end_stream=True)
            return
        deadline = None if head.timeout_s is None else asyncio.get_running_loop().time() + head.timeout_s
        call = _Call(stream_id, method, CallContext(head.metadata, self.peer, deadline),
                     g.MessageReader(self.server.max_message_bytes, head.gzip))
        self.calls[stream_id] = call
        if method.kind is Kind.BIDI:
            call.requests = asyncio.Queue()
            call.started = True
            self._start_task(call, self._bidi(call))
        if event.end_stream:
            self._ended(call)

    def _data(self, event: Event) -> None:
        call = self.calls.get(event.stream_id)
        if call is None:
            return
        if event.data:
            try:
                for payload in call.reader.feed(event.data):
                    self._request(call, payload)
                    if call.stream_id not in self.calls:
                        return
            except g.GrpcError as exc:
                self._fail(call, exc.code, str(exc))
                return
        if event.end_stream:
            self._ended(call)

    def _ended(self, call: _Call) -> None:
        """The client sent all its requests."""
        if call.reader.partial:
            self._fail(call, g.INTERNAL, "the request stream ended inside a message")
        elif call.requests is not None:
            call.requests.put_nowait(_END)
        elif not call.started:
            self._fail(call, g.UNIMPLEMENTED, "the call ended without its request message")

    def _request(self, call: _Call, payload: bytes) -> None:
        try:
            request = call.method.decode(payload)
        except Exception as exc:
            self._fail(call, g.INTERNAL, f"the request does not decode: {exc}")
            return
        if call.requests is not None:
            call.requests.put_nowait(request)
            return
        if call.started:
            self._fail(call, g.UNIMPLEMENTED, "a second request message on a call that takes one")
            return
        call.started = True
        if call.method.kind is Kind.SERVER_STREAM:
            self._start_task(call, self._stream(call, call.method.handler(request, call.context)))
            return
        self._unary(call, request)

    def _unary(self, call: _Call, request: Any) -> None:
        """The handler stepped at once: answered now if it does not wait, else finished by a task."""
        coro = call.method.handler(request, call.context)
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            self._answer(call, stop.value)
            return
        except Exception as exc:
            self._crashed(call, exc)
            return
        self._start_task(call, self._finish(call, _Resume(coro, yielded)))

    async def _finish(self, call: _Call, rest: _Resume) -> None:
        try:
            response = await rest
        except Exception as exc:
            self._crashed(call, exc)
        else:
            self._answer(call, response)
        self._write_soon()

    def _answer(self, call: _Call, response: Any) -> None:
        if self.calls.pop(call.stream_id, None) is None:
            return  # reset or expired meanwhile
        self._stop_timer(call)
        h2, stream_id = self.h2, call.stream_id
        try:
            payload = call.method.encode(response)
        except Exception as exc:
            h2.send_headers(stream_id, g.trailers_only(g.INTERNAL, f"the response does not encode: {exc}"), True)
            return
        h2.send_answer(stream_id, g.RESPONSE_HEADERS, g.message(payload), g.OK_TRAILERS)

    async def _stream(self, call: _Call, responses: AsyncIterator[Any]) -> None:
        h2, stream_id, encode = self.h2, call.stream_id, call.method.encode
        try:
            async for response in responses:
                if call.stream_id not in self.calls:
                    return
                if not call.headers_sent:
                    call.headers_sent = True
                    h2.send_headers(stream_id, g.RESPONSE_HEADERS)
                h2.send_data(stream_id, g.message(encode(response)))
                self._write_soon()
                if self._writable is not None:
                    await self._writable
        except Exception as exc:
            self._crashed(call, exc)
            self._write_soon()
            return
        finally:
            aclose = getattr(responses, "aclose", None)
            if aclose is not None:
                await aclose()
        self._end(call, g.OK, "")
        self._write_soon()

    async def _bidi(self, call: _Call) -> None:
        assert call.requests is not None
        await self._stream(call, call.method.handler(_requests(call.requests), call.context))

    def _start_task(self, call: _Call, coro: Coroutine[Any, Any, None]) -> None:
        call.task = asyncio.get_running_loop().create_task(coro)
        self.server.tasks.add(call.task)
        call.task.add_done_callback(self.server.tasks.discard)
        if call.context.deadline is not None and call.timer is None:
            call.timer = asyncio.get_running_loop().call_at(call.context.deadline, self._expire, call)

    def _expire(self, call: _Call) -> None:
        call.timer = None
        if call.stream_id in self.calls:
            self._fail(call, g.DEADLINE_EXCEEDED, "deadline exceeded")
            self._write_soon()

    def _crashed(self, call: _Call, exc: Exception) -> None:
        log.error("gRPC %s failed", call.method.handler, exc_info=exc)
        self._end(call, g.UNKNOWN, f"{type(exc).__name__}: {exc}")

    def _fail(self, call: _Call, code: int, why: str) -> None:
        """The call ends with status ``code``; its handler, if running, is cancelled."""
        self._end(call, code, why)
        self._cancel(call)

    def _end(self, call: _Call, code: int, why: str) -> None:
        if self.calls.pop(call.stream_id, None) is None:
            return
        self._stop_timer(call)
        block = g.trailers(code, why) if call.headers_sent else g.trailers_only(code, why)
        self.h2.send_headers(call.stream_id, block, end_stream=True)

    def _cancel(self, call: _Call) -> None:
        self._stop_timer(call)
        if call.task is not None and not call.task.done() and call.task is not asyncio.current_task():
            call.task.cancel()

    @staticmethod
    def _stop_timer(call: _Call) -> None:
        if call.timer is not None:
            call.timer.cancel()
            call.timer = None


async def _requests(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    while (request := await queue.get()) is not _END:
        yield request


def _peer_text(peer: object) -> str:
    """grpcio's peer form: ``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"ipv6:[{host}]:{peer[1]}" if ":" in host else f"ipv4:{host}:{peer[1]}"
    return "ipv4:0.0.0.0:0"


class GrpcServer:
    """Serves ``service``'s ``methods`` (by method name) on ``host:port`` (0 picks a port)."""

    def __init__(self, host: str, port: int, service: str, methods: dict[str, Method], max_message_bytes: int,
                 tls: ServerTls | None = None) -> None:
        self.host = host
        self.port = port
        self.service = service
        self.methods = methods
        self.max_message_bytes = max_message_bytes
        self.tls = tls
        self.connections: set[GrpcConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | SniffingListener | None = None

    async def start(self) -> None:
        """Listen; `ListenError` says why it cannot."""
        try:
            if self.tls is None:
                self._server = await asyncio.get_running_loop().create_server(
                    self.connection, self.host, self.port, reuse_address=True, backlog=_BACKLOG)
            else:
                self._server = SniffingListener(listen_socket(self.host, self.port, _BACKLOG), self.tls,
                                                self.connection, lambda protocol: None)
        except OSError as exc:
            raise ListenError(f"cannot listen on {self.host}:{self.port}: {exc}") from None
        self.port = self._server.sockets[0].getsockname()[1]

    def connection(self) -> GrpcConnection:
        return GrpcConnection(self)

    async def stop(self, grace_s: float) -> None:
        """Stop listening, send GOAWAY, give running calls ``grace_s`` to finish, cancel the rest."""
        if self._server is None:
            return
        self._server.close()
        for conn in list(self.connections):
            conn.h2.close()
            conn.flush()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=grace_s)
        for conn in list(self.connections):
            conn.close()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None
