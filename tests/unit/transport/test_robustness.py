"""What a server does with bad peers: malformed frames, garbage, peers that do
not read, silent peers; and how it starts and stops."""

from __future__ import annotations

import asyncio
import socket
import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import encode_frame_bytes
from skiff.transport import CloseReason, ConnectionClosed, ListenError, RemotingClient, RemotingServer
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine

from ._support import ThreadedServer, connect, raw_call, read_command, serving, wait_peer_close, wait_until

ECHO, BIG = 1, 2
BIG_BODY_BYTES = 64 * 1024
REQUESTS = 1000


def echo(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    return req.response(ext_fields={"id": req.ext("id")}, body=req.body)


def test_malformed_frame_closes_only_that_connection():
    closes: list[tuple[str, CloseReason, str | None]] = []
    server = ThreadedServer({ECHO: echo}, on_connection_close=lambda c, r: closes.append((c.peer_addr, r, c.close_detail)))
    try:
        with connect(server.port) as good, connect(server.port) as bad:
            assert raw_call(good, RemotingCommand(code=ECHO, opaque=1, ext_fields={"id": "a"})).ext("id") == "a"
            bad.sendall(struct.pack(">ii", 9, 5) + b"notjs")
            assert wait_peer_close(bad) == b""
            bad_addr = "127.0.0.1:%d" % bad.getsockname()[1]
            assert raw_call(good, RemotingCommand(code=ECHO, opaque=2, ext_fields={"id": "b"})).ext("id") == "b"
            with connect(server.port) as late:
                assert raw_call(late, RemotingCommand(code=ECHO, opaque=3, ext_fields={"id": "c"})).ext("id") == "c"
        ((addr, reason, detail),) = [c for c in closes if c[1] is CloseReason.FRAME_ERROR]
        assert addr == bad_addr and "not JSON" in detail
    finally:
        server.close()


def test_oversized_frame_length_closes_the_connection():
    server = ThreadedServer({ECHO: echo})
    try:
        with connect(server.port) as bad:
            bad.sendall(struct.pack(">i", 64 * 1024 * 1024))
            assert wait_peer_close(bad) == b""
    finally:
        server.close()


_header_fields = st.fixed_dictionaries(
    {},
    optional={
        "code": st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=5), st.none()),
        "opaque": st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.none()),
        "flag": st.one_of(st.integers(0, 3), st.integers(-5, 2**33), st.text(max_size=3)),
        "extFields": st.one_of(st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none()), max_size=4), st.integers(-9, 9), st.lists(st.integers(-9, 9), max_size=2)),
        "remark": st.one_of(st.text(max_size=10), st.integers(-9, 9)),
        "language": st.one_of(st.text(max_size=5), st.integers(-9, 99)),
    },
)


def _json_frame(header: dict, body: bytes, serialize: int) -> bytes:
    raw = orjson.dumps(header)
    return struct.pack(">iI", 4 + len(raw) + len(body), (serialize << 24) | len(raw)) + raw + body


garbage = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda h, b: struct.pack(">ii", 4 + len(h) + len(b), len(h)) + h + b,
              st.binary(max_size=60), st.binary(max_size=20)),
    st.builds(_json_frame, _header_fields, st.binary(max_size=20), st.sampled_from([0, 0, 1, 2, 255])),
    st.builds(lambda n, tail: struct.pack(">i", n) + tail, st.integers(-(2**31), 2**31 - 1), st.binary(max_size=16)),
)


@pytest.fixture(scope="module")
def fuzz_target():
    server = ThreadedServer({ECHO: echo})
    good = connect(server.port)
    yield server, good
    good.close()
    server.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=st.lists(garbage, min_size=1, max_size=3))
def test_fuzzed_input_never_breaks_the_server(fuzz_target, chunks):
    server, good = fuzz_target
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
    resp = raw_call(good, RemotingCommand(code=ECHO, opaque=7, ext_fields={"id": "still"}))
    assert (resp.code, resp.ext("id")) == (ResponseCode.SUCCESS, "still")


def test_a_peer_that_does_not_read_cannot_make_the_server_buffer_without_bound():
    high = 256 * 1024
    handled = []

    def big(conn, req):
        handled.append(conn)
        return req.response(body=b"x" * BIG_BODY_BYTES)

    server = ThreadedServer({BIG: big}, write_high_bytes=high)
    try:
        with connect(server.port) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            requests = b"".join(encode_frame_bytes(RemotingCommand(code=BIG, opaque=i)) for i in range(1, REQUESTS + 1))
            sock.setblocking(False)
            sent = _send_what_fits(sock, requests)

            def paused() -> bool:
                conns = server.server.connections
                return bool(conns) and conns[0].reading_paused

            server.call(wait_until(paused, what="the server pausing its reads"))
            (conn,) = server.server.connections
            buffered = server.call(_value(lambda: conn.write_buffer_bytes))
            count = len(handled)
            assert buffered <= high + 2 * BIG_BODY_BYTES
            # the kernel's socket buffers (4 MiB by default on Linux) take some answers too
            assert count < REQUESTS // 3, f"{count} of {REQUESTS} requests answered into a peer that does not read"
            sock.settimeout(10)
            sock.sendall(requests[sent:])
            opaques = [read_command(sock).opaque for _ in range(REQUESTS)]
            assert opaques == list(range(1, REQUESTS + 1)) and len(handled) == REQUESTS
    finally:
        server.close()


def _send_what_fits(sock: socket.socket, data: bytes) -> int:
    sent = 0
    while sent < len(data):
        try:
            sent += sock.send(data[sent:])
        except BlockingIOError:
            break
    return sent


async def _value(fn):
    return fn()


def test_requests_wait_in_order_while_the_socket_is_full():
    async def main():
        async with serving({ECHO: echo}) as (_, client, addr):
            conn = await client.connection(addr)
            conn.pause_writing()
            futures = [conn.request(RemotingCommand.request(ECHO, {"id": i}), 5000) for i in range(5)]
            conn.send_oneway(RemotingCommand.request(ECHO, {"id": "oneway"}))
            await asyncio.sleep(0.05)
            assert not any(f.done() for f in futures)
            conn.resume_writing()
            responses = await asyncio.gather(*futures)
            assert [r.ext("id") for r in responses] == ["0", "1", "2", "3", "4"]

    run_coroutine(main())


def test_idle_connections_are_closed():
    async def main():
        closes = []
        async with serving({ECHO: echo}, idle_timeout_s=0.2,
                           on_connection_close=lambda c, r: closes.append(r)) as (_, client, addr):
            conn = await client.connection(addr)
            await wait_until(lambda: conn.is_closed, what="idle close")
            assert closes == [CloseReason.IDLE_TIMEOUT] and conn.close_reason is CloseReason.PEER_CLOSED

    run_coroutine(main())


def test_stop_lets_running_handlers_answer_first():
    async def slow(conn, req):
        await asyncio.sleep(0.2)
        return req.response(remark="finished")

    async def main():
        closes = []
        server = RemotingServer("127.0.0.1", 0, {1: slow}, on_connection_close=lambda c, r: closes.append(r))
        await server.start()
        client = RemotingClient()
        conn = await client.connection(f"127.0.0.1:{server.port}")
        future = conn.request(RemotingCommand.request(1), 5000)
        await wait_until(lambda: server.connections[0].running_handlers == 1)
        await server.stop(drain_timeout_s=5)
        assert (await future).remark == "finished"
        assert closes == [CloseReason.SHUTDOWN]
        await wait_until(lambda: conn.is_closed)
        await client.close()

    run_coroutine(main())


def test_stop_gives_up_on_handlers_past_the_drain_timeout():
    async def stuck(conn, req):
        await asyncio.sleep(60)

    async def main():
        server = RemotingServer("127.0.0.1", 0, {1: stuck})
        await server.start()
        client = RemotingClient()
        conn = await client.connection(f"127.0.0.1:{server.port}")
        future = conn.request(RemotingCommand.request(1), 30_000)
        await wait_until(lambda: server.connections[0].running_handlers == 1)
        started = asyncio.get_running_loop().time()
        await server.stop(drain_timeout_s=0.2)
        assert asyncio.get_running_loop().time() - started < 5
        with pytest.raises(ConnectionClosed):
            await future
        await client.close()

    run_coroutine(main())


def test_a_port_in_use_is_a_clear_error():
    async def main():
        first = RemotingServer("127.0.0.1", 0, {})
        await first.start()
        second = RemotingServer("127.0.0.1", first.port, {})
        with pytest.raises(ListenError, match=f"127.0.0.1:{first.port}: address already in use"):
            await second.start()
        await first.stop()

    run_coroutine(main())
