"""Batched handlers: the requests of one read that go to one `Batched` handler reach it as
one run, in order; other requests between them split the runs and keep their place; a
handler that raises fails each request of its run; a wrapped handler sees requests alone."""

from __future__ import annotations

import asyncio
from typing import Any

from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RPC_ONEWAY, RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes
from skiff.transport.connection import Batched, Connection, HandlerResult
from skiff.transport.loop import run_coroutine

SEND, SEND_V2, OTHER, BROKEN = 10, 310, 11, 99


class FakeTransport(asyncio.Transport):
    """Collects what the connection writes; one `data_received` is one read."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: Any) -> None:
        self.written += data

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.written += line

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


def request(code: int, i: int, *, oneway: bool = False) -> bytes:
    cmd = RemotingCommand.request(code, {"i": i})
    cmd.opaque = i
    if oneway:
        cmd.flag |= RPC_ONEWAY
    return encode_frame_bytes(cmd)


def answers(transport: FakeTransport) -> list[tuple[int, str | None, int]]:
    return [(c.opaque, c.ext("by"), c.code) for c in FrameDecoder(1 << 20).feed(bytes(transport.written))]


def test_runs_of_one_read_reach_the_batch_handler_in_order() -> None:
    async def main() -> None:
        runs: list[list[int]] = []

        def one(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ext_fields={"by": "one"})

        def batch(conn: Connection, cmds: list[RemotingCommand]) -> list[HandlerResult]:
            runs.append([c.opaque for c in cmds])
            return [c.response(ext_fields={"by": "batch"}) for c in cmds]

        def other(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response(ext_fields={"by": "other"})

        sends = Batched(one, batch)
        conn = Connection({SEND: sends, SEND_V2: sends, OTHER: other})
        transport = FakeTransport()
        conn.connection_made(transport)
        conn.data_received(b"".join([request(SEND, 1), request(SEND_V2, 2), request(OTHER, 3), request(SEND, 4),
                                     request(SEND_V2, 5, oneway=True), request(SEND, 6)]))
        assert runs == [[1, 2], [4, 5, 6]]
        assert answers(transport) == [(1, "batch", 0), (2, "batch", 0), (3, "other", 0), (4, "batch", 0),
                                      (6, "batch", 0)]  # the oneway request gets no answer
        conn.data_received(request(SEND, 7))  # a lone request is a run of one, not held back
        assert runs[-1] == [7] and answers(transport)[-1] == (7, "batch", 0)

    run_coroutine(main())


def test_a_batch_handler_that_raises_fails_each_request_of_its_run() -> None:
    async def main() -> None:
        def one(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            return cmd.response()

        def batch(conn: Connection, cmds: list[RemotingCommand]) -> list[HandlerResult]:
            raise RuntimeError("the batch broke")

        conn = Connection({BROKEN: Batched(one, batch)})
        transport = FakeTransport()
        conn.connection_made(transport)
        conn.data_received(request(BROKEN, 1) + request(BROKEN, 2))
        replies = FrameDecoder(1 << 20).feed(bytes(transport.written))
        assert [(r.opaque, r.code, r.remark) for r in replies] == [
            (1, ResponseCode.SYSTEM_ERROR, "the batch broke"), (2, ResponseCode.SYSTEM_ERROR, "the batch broke")]
        assert not conn.is_closed

    run_coroutine(main())


def test_a_wrapped_handler_sees_each_request_alone() -> None:
    """ACL and metrics wrap handlers in plain functions: those get no runs."""
    async def main() -> None:
        seen: list[int] = []

        def batch(conn: Connection, cmds: list[RemotingCommand]) -> list[HandlerResult]:
            raise AssertionError("a wrapped handler's runs are not taken")

        inner = Batched(lambda conn, cmd: cmd.response(), batch)

        def wrapped(conn: Connection, cmd: RemotingCommand) -> HandlerResult:
            seen.append(cmd.opaque)
            return inner(conn, cmd)

        conn = Connection({SEND: wrapped})
        transport = FakeTransport()
        conn.connection_made(transport)
        conn.data_received(request(SEND, 1) + request(SEND, 2))
        assert seen == [1, 2] and [r.opaque for r in FrameDecoder(1 << 20).feed(bytes(transport.written))] == [1, 2]

    run_coroutine(main())
