"""The dialling side's short request path (`ClientConnection.request_json`, `RemotingClient.request_json`)
writes the frame `Connection.request` writes for the same command, byte for byte, with the same
opaques, timeouts and errors, a long run of them going out every `WRITE_EVERY_REQUESTS`; the
answers of one read resolve their futures in one pass and a server's request in the same read is
still served."""

from __future__ import annotations

import asyncio

import pytest

from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from skiff.protocol.frame import FrameDecoder, FrameError, encode_frame_bytes
from skiff.testing.inprocess import MemoryTransport
from skiff.transport import ConnectionClosed, RequestTimeout, TooManyPendingRequests
from skiff.transport.client import WRITE_EVERY_REQUESTS, ClientConnection
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine

from ._support import serving, wait_until

ECHO, ASK = 1, 40

CASES = [
    (310, "PYTHON", {"a": "PG", "b": "Topic", "i": "WAIT\x01true\x02UNIQ_KEY\x01AB\x02"}, b"x" * 100),
    (310, "JAVA", {}, b""),
    (36, "PYTHON", {"key": 'quote " backslash \\ tab \t', "ünï": "cødé ✓ \U0001F600"}, b"\x00\xff" * 3),
    (310, "PYTHON", {"lone": "\ud800 surrogate"}, b"body"),  # the kernel leaves it to the reference
    (10, "C\x7fPP", {"k": ""}, bytes(range(256))),
]


def written(transport: MemoryTransport) -> bytes:
    out = bytes(transport.out)
    transport.out.clear()
    return out


def connected(conn: Connection) -> MemoryTransport:
    transport = MemoryTransport()
    conn.connection_made(transport)
    return transport


def outcome(send) -> type[BaseException] | None:
    try:
        send().cancel()
    except Exception as exc:  # noqa: BLE001 - compared between the two paths
        return type(exc)
    return None


def test_request_json_writes_what_request_writes_byte_for_byte():
    async def main() -> None:
        short, reference = ClientConnection({}, serving=False), Connection({}, serving=False)
        short_out, reference_out = connected(short), connected(reference)
        for code, language, ext, body in CASES * 2:
            got_error = outcome(lambda: short.request_json(code, language, dict(ext), body, 3000))
            want_error = outcome(lambda: reference.request(
                RemotingCommand(code, ext_fields=dict(ext), body=body, language=language), 3000))
            assert got_error is want_error
            await asyncio.sleep(0)  # the writes of a loop step go out at its end
            await asyncio.sleep(0)
            got, want = written(short_out), written(reference_out)
            assert got == want
            assert bool(got) is (want_error is None)
        assert short.pending_requests == reference.pending_requests == len(CASES) * 2 - 2

    run_coroutine(main())


def test_a_frame_over_the_limit_raises_as_request_does():
    async def main() -> None:
        conn = ClientConnection({}, serving=False)
        connected(conn)
        with pytest.raises(FrameError, match="exceeds"):
            conn.request_json(310, "PYTHON", {}, b"x" * (16 * 1024 * 1024 + 1), 3000)
        assert conn.pending_requests == 0

    run_coroutine(main())


def test_errors_and_timeouts_are_requests():
    async def main() -> None:
        conn = ClientConnection({}, serving=False, max_pending=1)
        with pytest.raises(ConnectionClosed, match="not open yet"):
            conn.request_json(310, "PYTHON", {}, b"x", 3000)
        connected(conn)
        slow = conn.request_json(310, "PYTHON", {}, b"x", 30)
        with pytest.raises(TooManyPendingRequests):
            conn.request_json(310, "PYTHON", {}, b"y", 3000)
        with pytest.raises(RequestTimeout) as raised:
            await asyncio.wait_for(slow, 10)
        assert raised.value.code == 310 and conn.pending_requests == 0
        waiting = conn.request_json(310, "PYTHON", {}, b"z", 3000)
        conn.close()
        with pytest.raises(ConnectionClosed):
            await waiting
        with pytest.raises(ConnectionClosed):
            conn.request_json(310, "PYTHON", {}, b"x", 3000)

    run_coroutine(main())


def answer(opaque: int, n: int) -> bytes:
    return encode_frame_bytes(RemotingCommand(ResponseCode.SUCCESS, opaque=opaque, flag=RPC_TYPE_RESPONSE,
                                              ext_fields={"n": str(n)}))


def test_the_answers_of_one_read_resolve_their_requests_and_a_request_among_them_is_served():
    asked: list[str] = []

    def ask(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        asked.append(req.ext("q") or "")
        return req.response(ext_fields={"a": "yes"})

    async def main() -> None:
        conn = ClientConnection({ASK: ask}, serving=False)
        transport = connected(conn)
        futures = [conn.request_json(310, "PYTHON", {"i": str(i)}, b"m", 3000) for i in range(6)]
        await wait_until(lambda: bool(transport.out), what="the requests written")
        written(transport)
        server_asks = encode_frame_bytes(RemotingCommand(ASK, opaque=77, ext_fields={"q": "who"}))
        # answers out of order, an unknown opaque, the server's own request, then the rest
        conn.data_received(answer(3, 3) + answer(1, 1) + answer(999, 999) + server_asks + answer(2, 2))
        conn.data_received(answer(6, 6) + answer(5, 5) + answer(4, 4))
        results = await asyncio.wait_for(asyncio.gather(*futures), 10)
        assert [r.ext("n") for r in results] == ["1", "2", "3", "4", "5", "6"]
        assert asked == ["who"]
        await wait_until(lambda: bool(transport.out), what="the answer to the server's request")
        reply = written(transport)
        assert b'"opaque":77' in reply and b'"a":"yes"' in reply
        assert conn.pending_requests == 0

    run_coroutine(main())


def test_remoting_client_request_json_dials_then_sends_on_the_open_connection():
    def echo(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(ext_fields={"id": req.ext("id"), "lang": req.language}, body=req.body)

    async def main() -> None:
        async with serving({ECHO: echo}) as (_, client, addr):
            first = client.request_json(addr, ECHO, "GO", {"id": "1"}, b"one", 5000)
            assert not isinstance(first, asyncio.Future)  # no connection yet: a coroutine that dials
            resp = await first
            assert (resp.ext("id"), resp.ext("lang"), resp.body) == ("1", "GO", b"one")
            assert type(client.connections[addr]) is ClientConnection
            pipelined = [client.request_json(addr, ECHO, "GO", {"id": str(i)}, b"%d" % i, 5000) for i in range(50)]
            assert all(isinstance(p, asyncio.Future) for p in pipelined)
            answers = await asyncio.wait_for(asyncio.gather(*pipelined), 10)
            assert [(a.ext("id"), a.body) for a in answers] == [(str(i), b"%d" % i) for i in range(50)]

    run_coroutine(main())


def test_a_run_of_requests_goes_out_every_write_every_requests_and_the_rest_at_the_end_of_the_step():
    async def main() -> None:
        conn = ClientConnection({}, serving=False)
        transport = connected(conn)
        n = WRITE_EVERY_REQUESTS
        futures = [conn.request_json(310, "PYTHON", {"i": str(i)}, b"m", 3000) for i in range(2 * n + 5)]
        assert transport.writes == 2  # two runs of n, written while the step still makes requests
        assert len(FrameDecoder().feed(bytes(transport.out))) == 2 * n
        await wait_until(lambda: transport.writes == 3, what="the last 5 written at the end of the step")
        sent = FrameDecoder().feed(bytes(transport.out))
        assert [(c.opaque, c.ext("i"), c.body) for c in sent] == [(i + 1, str(i), b"m") for i in range(2 * n + 5)]
        for f in futures:
            f.cancel()

    run_coroutine(main())
