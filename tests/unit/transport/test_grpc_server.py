"""Skiff's own gRPC server (skiff.transport.grpc_server) on a real socket, called by grpcio's
own client: answers, metadata and peer, unknown methods, oversize messages, a cancelled
server stream (its handler is cancelled), a deadline, a bidi stream, and a large answer that
must wait for the client's flow-control window."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from skiff.transport.grpc_server import CallContext, GrpcServer, Kind, Method

SERVICE = "test.Echo"
MAX_BYTES = 64 * 1024
BIG = 3 * 1024 * 1024


def _same(data: bytes) -> bytes:
    return data


class Probe:
    """What the handlers saw."""

    def __init__(self) -> None:
        self.cancelled: asyncio.Event = asyncio.Event()
        self.metadata: dict[str, Any] = {}
        self.peer = ""
        self.remaining: float | None = None


def methods(probe: Probe) -> dict[str, Method]:
    async def echo(request: bytes, context: CallContext) -> bytes:
        probe.metadata = dict(context.invocation_metadata())
        probe.peer = context.peer()
        probe.remaining = context.time_remaining()
        return request

    async def later(request: bytes, context: CallContext) -> bytes:
        await asyncio.sleep(0.01)  # suspends: finished by a task
        return request[::-1]

    async def hang(request: bytes, context: CallContext) -> bytes:
        try:
            await asyncio.sleep(60)
        finally:
            probe.cancelled.set()
        return b""

    async def poll(request: bytes, context: CallContext) -> AsyncIterator[bytes]:
        yield b"first"
        try:
            await asyncio.sleep(60)  # a long poll the client cancels
        finally:
            probe.cancelled.set()
        yield b"never"

    async def big(request: bytes, context: CallContext) -> AsyncIterator[bytes]:
        for i in range(3):
            yield bytes([i]) * BIG

    async def chat(requests: AsyncIterator[bytes], context: CallContext) -> AsyncIterator[bytes]:
        async for request in requests:
            yield b"re:" + request

    def unary(fn: Any) -> Method:
        return Method(Kind.UNARY, _same, _same, fn)

    def stream(fn: Any) -> Method:
        return Method(Kind.SERVER_STREAM, _same, _same, fn)

    return {"Echo": unary(echo), "Later": unary(later), "Hang": unary(hang), "Poll": stream(poll),
            "Big": stream(big), "Chat": Method(Kind.BIDI, _same, _same, chat)}


async def serving(probe: Probe) -> tuple[GrpcServer, grpc.aio.Channel]:
    server = GrpcServer("127.0.0.1", 0, SERVICE, methods(probe), MAX_BYTES)
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}",
                                        options=[("grpc.max_receive_message_length", -1)])
    return server, channel


def run(test: Any) -> None:
    async def main() -> None:
        probe = Probe()
        server, channel = await serving(probe)
        try:
            async with asyncio.timeout(60):
                await test(channel, probe)
        finally:
            await channel.close()
            await server.stop(1.0)
    asyncio.run(main())


def test_unary_answers_with_metadata_peer_and_time_remaining():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        echo = channel.unary_unary(f"/{SERVICE}/Echo")
        later = channel.unary_unary(f"/{SERVICE}/Later")
        got = await echo(b"hello", metadata=(("x-mq-client-id", "c1"), ("trace-bin", b"\0\1")), timeout=30)
        assert got == b"hello"
        assert probe.metadata["x-mq-client-id"] == "c1" and probe.metadata["trace-bin"] == b"\0\1"
        assert probe.peer.startswith("ipv4:127.0.0.1:")
        # gRPC core encodes grpc-timeout in few digits and "may round up" (to 100 ms steps at 30 s)
        assert probe.remaining is not None and 20 < probe.remaining <= 30.5
        results = await asyncio.gather(*(later(bytes([i]) * 3 + b"x") for i in range(50)))
        assert results == [b"x" + bytes([i]) * 3 for i in range(50)]
    run(test)


def test_an_unknown_method_is_unimplemented():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await channel.unary_unary(f"/{SERVICE}/Nope")(b"x", timeout=30)
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await channel.unary_unary("/other.Service/Echo")(b"x", timeout=30)
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
        assert await channel.unary_unary(f"/{SERVICE}/Echo")(b"still fine", timeout=30) == b"still fine"
    run(test)


def test_an_oversize_message_is_resource_exhausted():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await channel.unary_unary(f"/{SERVICE}/Echo")(b"x" * (MAX_BYTES + 1), timeout=30)
        assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await channel.unary_unary(f"/{SERVICE}/Echo")(b"x" * MAX_BYTES, timeout=30) == b"x" * MAX_BYTES
    run(test)


def test_a_cancelled_server_stream_cancels_its_handler():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        call = channel.unary_stream(f"/{SERVICE}/Poll")(b"", timeout=30)
        assert await call.read() == b"first"
        call.cancel()  # RST_STREAM
        await asyncio.wait_for(probe.cancelled.wait(), 20)
    run(test)


def test_a_deadline_ends_the_call_and_cancels_its_handler():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await channel.unary_unary(f"/{SERVICE}/Hang")(b"", timeout=0.5)
        assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.wait_for(probe.cancelled.wait(), 20)
    run(test)


def test_bidi_and_a_large_stream_through_flow_control():
    async def test(channel: grpc.aio.Channel, probe: Probe) -> None:
        call = channel.stream_stream(f"/{SERVICE}/Chat")()
        for word in (b"a", b"b", b"c"):
            await call.write(word)
            assert await call.read() == b"re:" + word
        await call.done_writing()
        assert await call.read() is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK
        got = [m async for m in channel.unary_stream(f"/{SERVICE}/Big")(b"", timeout=30)]
        assert [(len(m), m[:1]) for m in got] == [(BIG, bytes([i])) for i in range(3)]
    run(test)
