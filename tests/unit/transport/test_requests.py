"""Requests and responses over loopback: matching by opaque, timeouts, oneway,
handler errors, server-to-client requests, body_parts."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from skiff.common.errors import ConfigError
from skiff.protocol.codes import ResponseCode, SerializeType
from skiff.protocol.command import RPC_ONEWAY, RemotingCommand
from skiff.protocol.frame import encode_frame_bytes
from skiff.testing.processes import free_port
from skiff.transport import (
    CloseReason,
    ConnectFailed,
    ConnectionClosed,
    RemotingClient,
    RequestTimeout,
    TooManyPendingRequests,
    parse_addr,
)
from skiff.transport.connection import Connection
from skiff.transport.late import LateAnswer
from skiff.transport.loop import run_coroutine

from ._support import ThreadedServer, connect, raw_call, read_command, serving, wait_until

ECHO, SLOW, BOOM, ABOOM, SILENT, PARTS = 1, 2, 3, 4, 5, 6


def echo(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    return req.response(ext_fields={"id": req.ext("id"), "peer": conn.peer_addr}, body=req.body)


async def slow(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(float(req.ext("delay_s", "0")))
    return req.response(ext_fields={"id": req.ext("id")})


def boom(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("the handler broke")


async def aboom(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    raise KeyError("async handler broke")


async def silent(conn: Connection, req: RemotingCommand) -> None:
    await asyncio.sleep(30)


def parts(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    backing = bytearray(b"..hello, ..world!")
    view = memoryview(backing)
    return req.response(body_parts=[view[2:8], b" ", view[11:], bytearray(b"")])


HANDLERS = {ECHO: echo, SLOW: slow, BOOM: boom, ABOOM: aboom, SILENT: silent, PARTS: parts}


def test_request_response_carries_header_and_body():
    async def main():
        async with serving(HANDLERS) as (server, client, addr):
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"id": 7}, b"payload"), 2000)
            assert (resp.code, resp.ext("id"), resp.body) == (ResponseCode.SUCCESS, "7", b"payload")
            conn = await client.connection(addr)
            (server_side,) = server.connections
            assert resp.ext("peer") == conn.local_addr == server_side.peer_addr
            assert conn.peer_addr == server_side.local_addr == addr

    run_coroutine(main())


def test_many_concurrent_requests_are_matched_by_opaque():
    async def main():
        async with serving(HANDLERS) as (_, client, addr):
            conn = await client.connection(addr)
            rng = random.Random(3)
            cmds = [RemotingCommand.request(SLOW, {"id": i, "delay_s": rng.random() / 50}) for i in range(300)]
            futures = [conn.request(cmd, 5000) for cmd in cmds]
            responses = await asyncio.gather(*futures)
            assert [r.ext("id") for r in responses] == [str(i) for i in range(300)]
            assert len({cmd.opaque for cmd in cmds}) == 300
            assert conn.pending_requests == 0

    run_coroutine(main())


def test_timeout_is_retriable_and_frees_the_pending_slot():
    async def main():
        async with serving(HANDLERS) as (_, client, addr):
            conn = await client.connection(addr)
            started = time.monotonic()
            with pytest.raises(RequestTimeout, match="no answer in 100 ms") as info:
                await client.invoke(addr, RemotingCommand.request(SILENT), 100)
            assert 0.09 <= time.monotonic() - started < 3
            assert info.value.retriable and conn.pending_requests == 0
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"id": 1}), 2000)
            assert resp.ext("id") == "1"

    run_coroutine(main())


def test_unknown_code_and_handler_failures_answer_without_closing():
    async def main():
        async with serving(HANDLERS) as (server, client, addr):
            resp = await client.invoke(addr, RemotingCommand.request(4321), 2000)
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "4321" in resp.remark
            resp = await client.invoke(addr, RemotingCommand.request(BOOM), 2000)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "the handler broke")
            resp = await client.invoke(addr, RemotingCommand.request(ABOOM), 2000)
            assert resp.code == ResponseCode.SYSTEM_ERROR and "async handler broke" in resp.remark
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"id": 2}), 2000)
            assert resp.ext("id") == "2" and len(server.connections) == 1

    run_coroutine(main())


def test_body_parts_are_written_in_order():
    async def main():
        async with serving(HANDLERS) as (_, client, addr):
            resp = await client.invoke(addr, RemotingCommand.request(PARTS), 2000)
            assert resp.body == b"hello, world!"

    run_coroutine(main())


def test_oneway_request_runs_the_handler_and_gets_no_response():
    seen = []

    def record(conn, req):
        seen.append(req.ext("n"))
        return req.response(remark="must not be sent")

    server = ThreadedServer({ECHO: echo, 9: record})
    try:
        with connect(server.port) as sock:
            oneway = RemotingCommand(code=9, opaque=100, flag=RPC_ONEWAY, ext_fields={"n": "1"})
            normal = RemotingCommand(code=ECHO, opaque=101, ext_fields={"id": "x"})
            sock.sendall(encode_frame_bytes(oneway) + encode_frame_bytes(normal))
            resp = read_command(sock)
            assert (resp.opaque, resp.ext("id")) == (101, "x")
            assert seen == ["1"]
    finally:
        server.close()


def test_server_calls_the_client_back_on_its_connection():
    async def main():
        got_oneway = asyncio.Event()
        server_conns: list[Connection] = []

        def hello(conn, req):
            server_conns.append(conn)
            return req.response()

        def client_handler(conn, req):
            if req.is_oneway:
                got_oneway.set()
                return None
            return req.response(ext_fields={"answer": int(req.ext("q")) * 2})

        async with serving({1: hello}) as (_, _unused, addr):
            client = RemotingClient({40: client_handler, 39: client_handler})
            try:
                await client.invoke(addr, RemotingCommand.request(1), 2000)
                (conn,) = server_conns
                resp = await conn.request(RemotingCommand.request(39, {"q": 21}), 2000)
                assert resp.ext("answer") == "42"
                conn.send_oneway(RemotingCommand.request(40))
                await asyncio.wait_for(got_oneway.wait(), 5)
            finally:
                await client.close()

    run_coroutine(main())


def test_pending_requests_fail_with_the_close_reason():
    async def main():
        async with serving(HANDLERS) as (server, client, addr):
            conn = await client.connection(addr)
            future = conn.request(RemotingCommand.request(SILENT), 10_000)
            await wait_until(lambda: server.connections and server.connections[0].running_handlers == 1)
            conn.close()
            with pytest.raises(ConnectionClosed) as info:
                await future
            assert info.value.retriable and info.value.reason is CloseReason.LOCAL_CLOSE
            assert conn.close_reason is CloseReason.LOCAL_CLOSE
            with pytest.raises(ConnectionClosed):
                conn.request(RemotingCommand.request(ECHO), 1000)

    run_coroutine(main())


def test_too_many_pending_requests_are_refused():
    async def main():
        async with serving(HANDLERS) as (server, _, addr):
            loop = asyncio.get_running_loop()
            _, conn = await loop.create_connection(lambda: Connection({}, serving=False, max_pending=2),
                                                   "127.0.0.1", server.port)
            futures = [conn.request(RemotingCommand.request(SLOW, {"delay_s": 0.05}), 5000) for _ in range(2)]
            with pytest.raises(TooManyPendingRequests) as info:
                conn.request(RemotingCommand.request(ECHO), 5000)
            assert info.value.retriable
            await asyncio.gather(*futures)
            assert (await conn.request(RemotingCommand.request(ECHO, {"id": 3}), 5000)).ext("id") == "3"
            conn.close()

    run_coroutine(main())


def test_client_reconnects_after_the_connection_closes():
    async def main():
        closes = []
        async with serving(HANDLERS, on_connection_close=lambda c, r: closes.append(r)) as (server, client, addr):
            first = await client.connection(addr)
            server.connections[0].close(CloseReason.LOCAL_CLOSE)
            await wait_until(lambda: first.is_closed, what="client sees the close")
            assert first.close_reason is CloseReason.PEER_CLOSED and closes == [CloseReason.LOCAL_CLOSE]
            resp = await client.invoke(addr, RemotingCommand.request(ECHO, {"id": 5}), 2000)
            second = await client.connection(addr)
            assert resp.ext("id") == "5" and second is not first and not second.is_closed

    run_coroutine(main())


def test_connect_failure_is_retriable():
    async def main():
        client = RemotingClient(connect_timeout_ms=2000)
        with pytest.raises(ConnectFailed, match="cannot connect to 127.0.0.1") as info:
            await client.invoke(f"127.0.0.1:{free_port()}", RemotingCommand.request(ECHO), 1000)
        assert info.value.retriable
        await client.close()

    run_coroutine(main())


def test_timeouts_fire_per_request_in_their_own_time():
    async def main():
        async with serving(HANDLERS) as (_, client, addr):
            conn = await client.connection(addr)
            loop = asyncio.get_running_loop()
            started = loop.time()
            futures = [conn.request(RemotingCommand.request(SILENT), ms) for ms in (300, 50, 150)]
            answered = conn.request(RemotingCommand.request(SLOW, {"id": "ok", "delay_s": 0.1}), 1000)
            waited = {}
            for ms, future in zip((300, 50, 150), futures):
                with pytest.raises(RequestTimeout):
                    await future
                waited[ms] = loop.time() - started
            assert (await answered).ext("id") == "ok"
            for ms, seconds in waited.items():
                assert ms / 1000 - 0.001 <= seconds < ms / 1000 + 2
            assert conn.pending_requests == 0

    run_coroutine(main())


@pytest.mark.parametrize("addr", ["", "host", "host:", ":10911", "host:0", "host:70000", "host:x1"])
def test_bad_addresses_are_config_errors(addr):
    with pytest.raises(ConfigError, match="is not a host:port address"):
        parse_addr(addr)


def test_addresses_parse():
    assert parse_addr("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_addr("[::1]:9876") == ("::1", 9876)


def test_answers_use_the_serialization_of_the_request():
    server = ThreadedServer(HANDLERS)
    try:
        with connect(server.port) as sock:
            for serialize in (SerializeType.ROCKETMQ, SerializeType.JSON):
                cmd = RemotingCommand(code=ECHO, opaque=5, ext_fields={"id": serialize.name}, body=b"b",
                                      serialize_type=serialize, language="JAVA")
                resp = raw_call(sock, cmd)
                assert (resp.serialize_type, resp.opaque, resp.ext("id"), resp.body) == (serialize, 5, serialize.name,
                                                                                          b"b")
    finally:
        server.close()


def test_a_handler_returning_a_future_is_answered_when_a_callback_resolves_it():
    """SYNC_MASTER's path: no task per request, the answer written from the future's callback."""
    async def main():
        loop = asyncio.get_running_loop()

        def later(conn: Connection, req: RemotingCommand) -> asyncio.Future[RemotingCommand]:
            answer: asyncio.Future[RemotingCommand] = loop.create_future()
            if req.ext("fail"):
                loop.call_later(0.01, answer.set_exception, RuntimeError("the callback broke"))
            else:
                loop.call_later(0.01, answer.set_result, req.response(ext_fields={"id": req.ext("id")}))
            return answer

        async with serving({7: later}) as (server, client, addr):
            conn = await client.connection(addr)
            futures = [conn.request(RemotingCommand.request(7, {"id": i}), 5000) for i in range(50)]
            assert [r.ext("id") for r in await asyncio.gather(*futures)] == [str(i) for i in range(50)]
            failed = await client.invoke(addr, RemotingCommand.request(7, {"fail": "1"}), 5000)
            assert failed.code == ResponseCode.SYSTEM_ERROR and "the callback broke" in (failed.remark or "")
            await wait_until(lambda: all(c.running_handlers == 0 for c in server.connections), 5, "handlers done")

    run_coroutine(main())


def test_late_answers_are_written_from_the_callback_that_gives_them():
    """SYNC_MASTER's path: a `LateAnswer` per request, given from a callback (once; a second
    give is ignored), counted as a running handler until given; given already by the handler,
    it is written at once; given after the peer left, it is dropped."""
    async def main():
        loop = asyncio.get_running_loop()
        owed: list[tuple[LateAnswer, RemotingCommand]] = []

        def later(conn: Connection, req: RemotingCommand) -> LateAnswer:
            answer = LateAnswer()
            if req.ext("now"):
                answer.give(req.response(ext_fields={"id": "now"}))
            else:
                owed.append((answer, req))
            return answer

        async with serving({7: later}) as (server, client, addr):
            conn = await client.connection(addr)
            futures = [conn.request(RemotingCommand.request(7, {"id": i}), 5000) for i in range(50)]
            await wait_until(lambda: len(owed) == 50, 5, "every request handled")
            served = next(iter(server.connections))
            assert served.running_handlers == 50
            drained = asyncio.ensure_future(served.wait_handlers())
            for answer, req in reversed(owed):  # answered out of order, each matched by opaque
                answer.give(req.response(ext_fields={"id": req.ext("id")}))
                answer.give(req.response(ResponseCode.SYSTEM_ERROR, "a second answer"))
            assert [r.ext("id") for r in await asyncio.gather(*futures)] == [str(i) for i in range(50)]
            await asyncio.wait_for(drained, 5)
            assert served.running_handlers == 0
            now = await client.invoke(addr, RemotingCommand.request(7, {"now": "1"}), 5000)
            assert now.ext("id") == "now"
            owed.clear()
            conn.request(RemotingCommand.request(7, {"id": "gone"}), 5000).add_done_callback(lambda f: f.exception())
            await wait_until(lambda: owed, 5, "the last request handled")
            conn.close()
            await wait_until(lambda: served.is_closed, 5, "the server seeing the close")
            owed[0][0].give(owed[0][1].response())
            assert served.running_handlers == 0
        # awaitable, for coroutine callers (the gRPC endpoint)
        pending = LateAnswer()
        loop.call_later(0.01, pending.give, RemotingCommand.request(1).response(ext_fields={"id": "awaited"}))
        assert (await pending).ext("id") == "awaited"

    run_coroutine(main())


def test_late_answers_owed_count_against_max_pending_and_drain_every_waiter():
    """A serving connection owing ``max_pending`` late answers reads no more requests; the
    answers given, it reads the rest (in a step of its own, not inside the giving callback);
    two `wait_handlers` callers both return once nothing is owed."""
    async def main():
        loop = asyncio.get_running_loop()
        owed: list[tuple[LateAnswer, RemotingCommand]] = []

        def later(conn: Connection, req: RemotingCommand) -> LateAnswer:
            owed.append((LateAnswer(), req))
            return owed[-1][0]

        served: list[Connection] = []

        def made() -> Connection:
            served.append(Connection({7: later}, max_pending=3))
            return served[-1]
        server = await loop.create_server(made, "127.0.0.1", 0)
        client = RemotingClient()
        try:
            conn = await client.connection(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
            futures = [conn.request(RemotingCommand.request(7, {"id": i}), 5000) for i in range(7)]
            await wait_until(lambda: len(owed) == 3, 5, "three requests handled")
            await asyncio.sleep(0.1)
            assert len(owed) == 3 and served[0].reading_paused
            waiters = [asyncio.ensure_future(served[0].wait_handlers()) for _ in range(2)]
            for _ in range(3):  # each batch given answers three, and lets three more in
                batch = list(owed)
                owed.clear()
                for answer, req in batch:
                    answer.give(req.response(ext_fields={"id": req.ext("id")}))
                    assert not owed, "a request was handled inside the callback giving an answer"
                await wait_until(lambda: owed or all(f.done() for f in futures), 5, "the next requests")
            assert [r.ext("id") for r in await asyncio.gather(*futures)] == [str(i) for i in range(7)]
            await asyncio.wait_for(asyncio.gather(*waiters), 5)
            assert served[0].running_handlers == 0 and not served[0].reading_paused
        finally:
            await client.close()
            server.close()

    run_coroutine(main())
