"""In-process servers on 127.0.0.1 port 0, and a blocking raw-socket peer for
feeding a server bytes that no well-behaved client would send."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import decode_frame, encode_frame_bytes
from skiff.transport import Handler, RemotingClient, RemotingServer
from skiff.transport.loop import loop_factory


@contextlib.asynccontextmanager
async def serving(handlers: Mapping[int, Handler], **kwargs: Any) -> AsyncIterator[tuple[RemotingServer, RemotingClient, str]]:
    server = RemotingServer("127.0.0.1", 0, handlers, **kwargs)
    await server.start()
    client = RemotingClient()
    try:
        yield server, client, f"127.0.0.1:{server.port}"
    finally:
        await client.close()
        await server.stop(0.2)


async def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s} s")
        await asyncio.sleep(0.005)


class ThreadedServer:
    """A RemotingServer on its own loop in a thread, for blocking-socket tests."""

    def __init__(self, handlers: Mapping[int, Handler], **kwargs: Any) -> None:
        self.loop = loop_factory()()
        self.server = RemotingServer("127.0.0.1", 0, handlers, **kwargs)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.call(self.server.start())

    def call(self, coro: Any, timeout_s: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    @property
    def port(self) -> int:
        return self.server.port

    def close(self) -> None:
        self.call(self.server.stop(1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def connect(port: int, timeout_s: float = 5.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    sock.settimeout(timeout_s)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"peer closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_command(sock: socket.socket) -> RemotingCommand:
    (length,) = struct.unpack(">i", recv_exact(sock, 4))
    return decode_frame(recv_exact(sock, length))


def raw_call(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    sock.sendall(encode_frame_bytes(cmd))
    return read_command(sock)


def wait_peer_close(sock: socket.socket) -> bytes:
    """Read until the peer closes (EOF or reset) and return what it sent first;
    raises `TimeoutError` if it keeps the connection open past the socket timeout."""
    received = bytearray()
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return bytes(received)
