"""One remoting connection, the same class on the server and the client side.

Either side may send requests on a connection: a client asks a broker, and a
broker asks a client back (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED).
Responses find their request by opaque, which each connection counts on its own.

Requests from the peer go to a handler table keyed by request code. A handler
returns a response, None (no answer), a `LateAnswer` a callback gives later, or
an awaitable of a response or None; only an awaitable costs a task, so the
synchronous handlers of the send path answer in the same loop iteration that
read the request, and a late answer is written from the callback that gives it.

Backpressure, in both directions:
- a peer that sends requests but does not read the answers makes this side's
  output buffer grow; past the high mark a serving connection stops reading
  from that peer until the buffer drains below the low mark (and also while it
  has `max_pending` handlers still running);
- requests this side sends while the buffer is above the high mark wait in an
  in-order queue until it drains; `max_pending` bounds them.
A client connection never stops reading on its own output: the answers it reads
are what lets the server drain, so stopping would deadlock both ends.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import functools
import logging
import socket
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import NamedTuple, Union

from skiff.common.errors import SkiffError
from skiff.common.limits import CONNECTION_PENDING_REQUESTS, CONNECTION_WRITE_HIGH_BYTES, FRAME_MAX_BYTES
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RPC_ONEWAY, RPC_TYPE_RESPONSE, Buffer, RemotingCommand
from skiff.protocol.frame import FrameDecoder, FrameError, encode_frame
from skiff.protocol.errors import ConnectionClosed, RequestTimeout
from skiff.transport.deadlines import Deadlines
from skiff.transport.errors import TooManyPendingRequests
from skiff.transport.late import LateAnswer
from skiff.transport.output import GatheredOutput
from skiff.transport.tls import TLS_AT_PLAINTEXT_PORT, starts_tls

log = logging.getLogger(__name__)

HandlerResult = Union[RemotingCommand, None, LateAnswer, Awaitable[Union[RemotingCommand, None]]]
Handler = Callable[["Connection", RemotingCommand], HandlerResult]
"""Answers one request: a response, None for no answer, a late answer, or an awaitable."""
Answer = Union[RemotingCommand, bytes]
"""A response, or its whole frame already encoded for the request (its opaque and serialization)."""
BatchResult = Union[Answer, None, LateAnswer, Awaitable[Union[Answer, None]]]
BatchHandler = Callable[["Connection", list[RemotingCommand]], list[BatchResult]]
"""Answers the requests that arrived together (one read), in their order, each as a `Handler` would,
or with its answer's frame already encoded (the single sends' path: no command per answer)."""


class Batched:
    """A handler that also takes a run of requests at once: the connection hands it every
    request of its codes that one read brought, in one call (their work is then shared:
    one append, one flush). Wrapping it (ACL, metrics) gives a plain `Handler` again,
    which sees each request alone."""

    __slots__ = ("one", "batch")

    def __init__(self, one: Handler, batch: BatchHandler) -> None:
        self.one = one
        self.batch = batch

    def __call__(self, conn: Connection, cmd: RemotingCommand) -> HandlerResult:
        return self.one(conn, cmd)

CloseListener = Callable[["Connection", "CloseReason"], None]

WRITE_LOW_DIVISOR = 4
"""The low mark, below which reading resumes, is the high mark divided by this."""

_PAUSED_BY_WRITES = 1
_PAUSED_BY_HANDLERS = 2
_PAUSED_BY_OWNER = 4
_PAUSED_FOR_TURN = 8

READ_TURN_BYTES = 256_000
"""uvloop's receive buffer: a read that filled it left more waiting, and libuv reads
such a socket again at once; a serving connection then yields its turn (`_take_turns`)."""


class CloseReason(enum.StrEnum):
    """Why a connection closed; kept on the connection, given to close listeners,
    and carried as ``reason`` by the `ConnectionClosed` of its pending requests."""

    PEER_CLOSED = "the peer closed the connection"
    LOCAL_CLOSE = "closed by this side"
    SHUTDOWN = "the server is shutting down"
    FRAME_ERROR = "the peer sent a malformed frame"
    IDLE_TIMEOUT = "no traffic within the idle timeout"
    WRITE_ERROR = "writing to the socket failed"
    SOCKET_ERROR = "the socket failed"


def _format_addr(addr: object) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = str(addr[0])
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return str(addr) if addr else "?"


def _reason_of(exc: BaseException | None) -> CloseReason:
    if exc is None:
        return CloseReason.PEER_CLOSED
    if isinstance(exc, BrokenPipeError):
        return CloseReason.WRITE_ERROR
    return CloseReason.SOCKET_ERROR


class _Pending(NamedTuple):
    future: asyncio.Future[RemotingCommand]
    code: int
    timeout_ms: int
    bucket: int


class Connection(asyncio.Protocol):
    """A framed remoting connection: requests out by opaque, requests in by code."""

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        serving: bool = True,
        max_pending: int = CONNECTION_PENDING_REQUESTS,
        write_high_bytes: int = CONNECTION_WRITE_HIGH_BYTES,
        max_frame_bytes: int = FRAME_MAX_BYTES,
    ) -> None:
        self._handlers = handlers
        self._batches = {code: h.batch for code, h in handlers.items() if isinstance(h, Batched)}
        self._serving = serving
        self._max_pending = max_pending
        self._write_high_bytes = write_high_bytes
        self._decoder = FrameDecoder(max_frame_bytes)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, _Pending] = {}
        self._deadlines: Deadlines  # made with the loop, in connection_made
        self._unsent: collections.deque[list[Buffer]] = collections.deque()
        self._output: GatheredOutput  # made with the transport, in connection_made
        self._backlog: collections.deque[RemotingCommand] = collections.deque()
        self._tasks: set[asyncio.Future[typing.Any]] = set()
        self._late = 0
        """Late answers owed (`LateAnswer`s not given yet)."""
        self._late_drained: asyncio.Event | None = None
        self._listeners: list[CloseListener] = []
        self._opaque = 0
        self._write_paused = False
        self._read_paused = 0
        self._last_read_s = 0.0
        self._lost = asyncio.Event()
        self.peer: tuple[str, int] = ("?", 0)
        self.local: tuple[str, int] = ("?", 0)
        self.peer_addr = "?"
        self.local_addr = "?"
        self.close_reason: CloseReason | None = None
        self.close_detail: str | None = None

    def __repr__(self) -> str:
        state = f"closed: {self.close_reason.name}" if self.close_reason else "open"
        return f"<Connection {self.local_addr} -> {self.peer_addr} {state}>"

    # ----------------------------------------------------------------- state

    @property
    def is_closed(self) -> bool:
        return self.close_reason is not None

    @property
    def socket_closed(self) -> bool:
        """True once the socket itself is gone (``is_closed`` turns true earlier, on close())."""
        return self._lost.is_set()

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    @property
    def running_handlers(self) -> int:
        return len(self._tasks) + self._late

    @property
    def reading_paused(self) -> bool:
        return bool(self._read_paused)

    @property
    def tls_version(self) -> str | None:
        """The TLS version the connection speaks ("TLSv1.3"); None for plaintext."""
        ssl_object = self._transport.get_extra_info("ssl_object") if self._transport is not None else None
        return ssl_object.version() if ssl_object is not None else None

    @property
    def write_buffer_bytes(self) -> int:
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    @property
    def idle_s(self) -> float:
        """Seconds since bytes last arrived from the peer."""
        return self._loop.time() - self._last_read_s if self._loop is not None else 0.0

    def add_close_listener(self, listener: CloseListener) -> None:
        """Call ``listener(connection, reason)`` once when the connection closes."""
        if self.close_reason is not None:
            listener(self, self.close_reason)
        else:
            self._listeners.append(listener)

    # ------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = typing.cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._transport = transport
        self._loop = asyncio.get_running_loop()
        self._output = GatheredOutput(transport, self._loop)
        self._deadlines = Deadlines(self._loop, self._expire)
        self._last_read_s = self._loop.time()
        self.peer = transport.get_extra_info("peername") or ("?", 0)
        self.local = transport.get_extra_info("sockname") or ("?", 0)
        self.peer_addr = _format_addr(self.peer)
        self.local_addr = _format_addr(self.local)
        transport.set_write_buffer_limits(
            high=self._write_high_bytes, low=self._write_high_bytes // WRITE_LOW_DIVISOR
        )
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self._mark_closed(_reason_of(exc), str(exc) if exc else None)
        self._lost.set()

    def data_received(self, data: bytes) -> None:
        self._last_read_s = self._loop.time()  # type: ignore[union-attr]
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            why = f"{exc}{TLS_AT_PLAINTEXT_PORT if starts_tls(data) else ''}"
            log.warning("closing the connection from %s: malformed frame: %s", self.peer_addr, why)
            self.close(CloseReason.FRAME_ERROR, why)
            return
        if self._backlog:
            self._backlog.extend(commands)
        elif len(commands) == 1 and self._batches:
            self._dispatch_one(commands[0])
        else:
            self._dispatch(commands)
        if self._serving and len(data) >= READ_TURN_BYTES and not self._read_paused:
            self._take_turns()

    def _take_turns(self) -> None:
        """Read no more from this peer until the next loop step.

        libuv reads a socket up to 32 times in a row while each read fills its
        buffer, so a producer that keeps megabytes of batches in flight would
        have the loop handle all of them before it reads any other connection:
        a consumer's pulls then wait behind them and the consumer falls behind.
        Pausing until the next step after a full read lets the others in; a read
        that did not fill the buffer drained the socket, and libuv moves on anyway.
        """
        self._pause_reading(_PAUSED_FOR_TURN)
        self._loop.call_soon(self._resume_reading, _PAUSED_FOR_TURN)  # type: ignore[union-attr]

    def _dispatch_one(self, cmd: RemotingCommand) -> None:
        """`_dispatch` of a read that brought one command (a synchronous sender's request)."""
        batch = None if cmd.flag & RPC_TYPE_RESPONSE else self._batches.get(cmd.code)
        if batch is None or self.close_reason is not None:
            self._dispatch((cmd,))
            return
        output = self._output
        output.hold()
        try:
            self._on_requests(batch, [cmd])
        finally:
            output.release()

    def _dispatch(self, commands: Iterable[RemotingCommand]) -> None:
        """Handle commands in order until reading pauses; the rest wait in the backlog.

        Consecutive requests for one `Batched` handler are handed to it as one run. Answers
        written meanwhile go out together when the batch ends.
        """
        output = self._output
        output.hold()
        try:
            it = iter(commands)
            batches = self._batches
            run: list[RemotingCommand] = []
            run_batch: BatchHandler | None = None
            for cmd in it:
                if self.close_reason is not None:
                    return
                batch = batches.get(cmd.code) if batches and not cmd.flag & RPC_TYPE_RESPONSE else None
                if batch is not None:
                    if run and batch is not run_batch:
                        self._on_requests(run_batch, run)  # type: ignore[arg-type]  # set with the run
                        run = []
                    run_batch = batch
                    run.append(cmd)
                    continue
                if run:
                    self._on_requests(run_batch, run)  # type: ignore[arg-type]
                    run = []
                if cmd.flag & RPC_TYPE_RESPONSE:
                    self._on_response(cmd)
                else:
                    self._on_request(cmd)
                if self._read_paused:
                    self._backlog.extend(it)
                    return
            if run and self.close_reason is None:
                self._on_requests(run_batch, run)  # type: ignore[arg-type]
        finally:
            output.release()

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._serving:
            self._pause_reading(_PAUSED_BY_WRITES)

    def resume_writing(self) -> None:
        self._write_paused = False
        self._resume_reading(_PAUSED_BY_WRITES)
        while self._unsent and not self._write_paused and self.close_reason is None:
            self._output.write(self._unsent.popleft())

    # ---------------------------------------------------------- sending side

    def request(self, cmd: RemotingCommand, timeout_ms: int) -> asyncio.Future[RemotingCommand]:
        """Send a request and return the future of its response.

        The future fails with `RequestTimeout` after ``timeout_ms`` and with
        `ConnectionClosed` if the connection closes first. Awaiting it right
        away is the usual use; holding many of them pipelines requests without
        a task each. Raises `ConnectionClosed` or `TooManyPendingRequests` at once.
        """
        self._check_open()
        if len(self._pending) >= self._max_pending:
            raise TooManyPendingRequests(
                f"{len(self._pending)} requests already wait for responses from {self.peer_addr}"
            )
        cmd.opaque = self._next_opaque()
        cmd.flag &= ~(RPC_ONEWAY | RPC_TYPE_RESPONSE)
        return self._send_awaiting(encode_frame(cmd), cmd.opaque, cmd.code, timeout_ms)

    def _send_awaiting(self, frames: list[Buffer], opaque: int, code: int,
                       timeout_ms: int) -> asyncio.Future[RemotingCommand]:
        """Write an encoded request and return the future its answer (or its deadline, or the
        close) settles: the bookkeeping every way of making a request shares."""
        loop = self._loop
        assert loop is not None  # open: _check_open or the caller's own test ran first
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = _Pending(future, code, timeout_ms, self._deadlines.add(opaque, timeout_ms / 1000.0))
        self._send_request(frames)
        return future

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that gets no response; raises `ConnectionClosed` when closed."""
        self._check_open()
        cmd.opaque = self._next_opaque()
        cmd.flag = (cmd.flag | RPC_ONEWAY) & ~RPC_TYPE_RESPONSE
        self._send_request(encode_frame(cmd))

    def send(self, response: RemotingCommand, at_once: bool = False) -> None:
        """Write a response (its opaque already set); dropped if the connection closed.
        ``at_once``: to the socket now, unless a batch of requests is being handled."""
        if self.close_reason is not None:
            log.debug("dropping response %d to %s: connection closed", response.opaque, self.peer_addr)
            return
        try:
            frames = encode_frame(response)
        except FrameError as exc:
            log.error("cannot encode the response to request %d from %s: %s", response.opaque, self.peer_addr, exc)
            frames = encode_frame(RemotingCommand(
                code=ResponseCode.SYSTEM_ERROR, opaque=response.opaque, flag=RPC_TYPE_RESPONSE, ext_fields={},
                remark=f"the response could not be encoded: {exc}", serialize_type=response.serialize_type))
        self._output.write(frames, at_once)

    def close(self, reason: CloseReason = CloseReason.LOCAL_CLOSE, detail: str | None = None, *, abort: bool = False) -> None:
        """Close with ``reason``: pending requests fail now, buffered output is
        flushed first unless ``abort``."""
        self._mark_closed(reason, detail)
        transport = self._transport
        if transport is not None:
            if abort:
                transport.abort()
            elif not transport.is_closing():
                self._output.flush()
                transport.close()

    async def wait_closed(self) -> None:
        await self._lost.wait()

    def stop_reading(self) -> None:
        """Take no more requests from the peer (used while a server drains)."""
        self._pause_reading(_PAUSED_BY_OWNER)

    async def wait_handlers(self) -> None:
        """Wait until every handler still running on this connection has answered."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))
        while self._late:
            if self._late_drained is None:
                self._late_drained = asyncio.Event()
            self._late_drained.clear()
            await self._late_drained.wait()

    def cancel_handlers(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self.close_reason is not None:
            raise ConnectionClosed(self.peer_addr, self.close_reason)
        if self._transport is None:
            raise ConnectionClosed(self.peer_addr, "the connection is not open yet")

    def _next_opaque(self) -> int:
        opaque = self._opaque
        while True:
            opaque = (opaque + 1) & 0x7FFFFFFF
            if opaque and opaque not in self._pending:
                self._opaque = opaque
                return opaque

    def _send_request(self, frames: list[Buffer]) -> None:
        if self._write_paused or self._unsent:
            self._unsent.append(frames)
        else:
            self._output.write(frames)

    def _expire(self, opaque: int, bucket: int) -> None:
        entry = self._pending.get(opaque)
        if entry is None or entry.bucket != bucket:
            return
        del self._pending[opaque]
        if not entry.future.done():
            entry.future.set_exception(RequestTimeout(entry.code, self.peer_addr, entry.timeout_ms))

    def _on_response(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            log.debug("dropping a response with unknown opaque %d from %s", cmd.opaque, self.peer_addr)
            return
        if not entry.future.done():
            entry.future.set_result(cmd)

    def _on_request(self, cmd: RemotingCommand) -> None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            self._reply(cmd, cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} is not supported"))
            return
        try:
            result = handler(self, cmd)
        except Exception as exc:
            self._reply(cmd, self._error_response(cmd, exc))
            return
        self._settle(cmd, result)

    def _on_requests(self, batch: BatchHandler, cmds: list[RemotingCommand]) -> None:
        """A run of requests for one batch handler; a handler that raises fails each of them."""
        try:
            results = batch(self, cmds)
        except Exception as exc:
            for cmd in cmds:
                self._reply(cmd, self._error_response(cmd, exc))
            return
        frames: list[Buffer] = []  # answers already encoded, written together
        for cmd, result in zip(cmds, results):
            if type(result) is bytes:
                if not cmd.flag & RPC_ONEWAY:
                    frames.append(result)
                continue
            if frames:
                self._write_frames(frames)
                frames = []
            self._settle(cmd, result)
        if frames:
            self._write_frames(frames)

    def _write_frames(self, frames: list[Buffer]) -> None:
        if self.close_reason is None:
            self._output.write([b"".join(frames)] if len(frames) > 1 else frames)

    def _settle(self, cmd: RemotingCommand, result: BatchResult) -> None:
        """Where a handler's result goes: written now, owed (a late answer), or awaited."""
        if result is None or type(result) is RemotingCommand or type(result) is bytes:
            self._reply(cmd, result)
        elif isinstance(result, LateAnswer):
            self._owe(cmd, result)
        else:
            self._spawn(cmd, result)  # type: ignore[arg-type]

    def _owe(self, cmd: RemotingCommand, answer: LateAnswer) -> None:
        self._late += 1
        if self._late + len(self._tasks) >= self._max_pending:
            self._pause_reading(_PAUSED_BY_HANDLERS)
        answer.then(self._late_answered, cmd)

    def _late_answered(self, cmd: RemotingCommand, response: Answer) -> None:
        """Written at once when it was the last answer owed here (a producer waiting on each
        send); else with the others the same callback gives, at the end of the loop step."""
        self._late -= 1
        if type(response) is bytes:
            if not cmd.flag & RPC_ONEWAY and self.close_reason is None:
                self._output.write([response], not self._late)
        elif not cmd.flag & RPC_ONEWAY:
            assert isinstance(response, RemotingCommand)
            response.opaque = cmd.opaque
            response.flag |= RPC_TYPE_RESPONSE
            self.send(response, not self._late)
        if self._read_paused & _PAUSED_BY_HANDLERS and self._late + len(self._tasks) < self._max_pending:
            # not from inside the callback giving the answer (a slave's acknowledgement
            # answering its waiters): the backlog's requests run in a step of their own
            self._loop.call_soon(self._resume_reading, _PAUSED_BY_HANDLERS)  # type: ignore[union-attr]
        if not self._late and self._late_drained is not None:
            self._late_drained.set()

    def _spawn(self, cmd: RemotingCommand, awaitable: Awaitable[RemotingCommand | None]) -> None:
        task: asyncio.Future[typing.Any]
        if isinstance(awaitable, asyncio.Future):  # a future a callback resolves: answered from its done callback
            task = awaitable
            task.add_done_callback(functools.partial(self._answered, cmd))
        else:
            task = asyncio.ensure_future(self._finish(cmd, awaitable))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        if len(self._tasks) + self._late >= self._max_pending:
            self._pause_reading(_PAUSED_BY_HANDLERS)

    def _task_done(self, task: asyncio.Future[typing.Any]) -> None:
        self._tasks.discard(task)
        if len(self._tasks) + self._late < self._max_pending:
            self._resume_reading(_PAUSED_BY_HANDLERS)

    async def _finish(self, cmd: RemotingCommand, awaitable: Awaitable[RemotingCommand | None]) -> None:
        try:
            response = await awaitable
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._error_response(cmd, exc)
        self._reply(cmd, response)

    def _answered(self, cmd: RemotingCommand, future: asyncio.Future[RemotingCommand | None]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        self._reply(cmd, future.result() if exc is None else self._error_response(cmd, exc))  # type: ignore[arg-type]

    def _error_response(self, cmd: RemotingCommand, exc: Exception) -> RemotingCommand:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, SkiffError):
            log.warning("request code %d from %s failed: %s", cmd.code, self.peer_addr, text)
        else:
            log.exception("handler of request code %d from %s failed: %s", cmd.code, self.peer_addr, text)
        return cmd.response(ResponseCode.SYSTEM_ERROR, text)

    def _reply(self, request: RemotingCommand, response: Answer | None) -> None:
        if response is None or request.flag & RPC_ONEWAY:
            return
        if type(response) is bytes:
            if self.close_reason is None:
                self._output.write([response])
            return
        assert isinstance(response, RemotingCommand)
        response.opaque = request.opaque
        response.flag |= RPC_TYPE_RESPONSE
        self.send(response)

    def _pause_reading(self, why: int) -> None:
        if not self._read_paused and self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()
        self._read_paused |= why

    def _resume_reading(self, why: int) -> None:
        if not self._read_paused & why:
            return
        self._read_paused &= ~why
        if self._backlog and not self._read_paused:
            backlog, self._backlog = self._backlog, collections.deque()
            self._dispatch(backlog)
        if not self._read_paused and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def _mark_closed(self, reason: CloseReason, detail: str | None) -> None:
        if self.close_reason is not None:
            return
        self.close_reason = reason
        self.close_detail = detail
        self._unsent.clear()
        self._backlog.clear()
        pending, self._pending = self._pending, {}
        if self._transport is not None:
            self._deadlines.clear()
        for entry in pending.values():
            if not entry.future.done():
                entry.future.set_exception(ConnectionClosed(self.peer_addr, reason))
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            try:
                listener(self, reason)
            except Exception:
                log.exception("close listener of %r failed", self)
