"""Requests per second of small request/response pairs over loopback.

    skiff bench transport [--seconds 3] [--window 256] [--connections 1 8]

The server runs in a child process (its own core) and answers every request
from a synchronous handler; the client keeps ``window`` requests in flight on
each connection, so the figure is the transport's, not a round trip's. The CPU
time per request of each side is printed too: on a busy machine it says more
than the rate, which depends on how much of a core each side got.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection as Pipe

from skiff.protocol.command import RemotingCommand
from skiff.transport.client import RemotingClient
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine
from skiff.transport.server import RemotingServer

BENCH_CODE = 10
REQUEST_TIMEOUT_MS = 30_000


def _answer(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    return req.response(ext_fields={"queueId": "1", "queueOffset": "42"})


def _serve(pipe: Pipe) -> None:
    """The server process: answers requests; tells its CPU time when asked, until "stop"."""

    def control() -> None:
        while pipe.recv() == "cpu":
            pipe.send(time.process_time())

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, {BENCH_CODE: _answer})
        await server.start()
        pipe.send(server.port)
        await asyncio.get_running_loop().run_in_executor(None, control)
        await server.stop(1.0)

    run_coroutine(main())


def _server_cpu_s(pipe: Pipe) -> float:
    pipe.send("cpu")
    return float(pipe.recv())


async def _drive(conn: Connection, window: int, until: float) -> int:
    """Keep ``window`` requests in flight until the clock passes ``until``; count answers.

    Each answer taken from the front of the window sends one more request, so
    the window stays full and both ends work at once.
    """
    loop = asyncio.get_running_loop()
    header = {"topic": "BenchTopic", "queueId": 1}
    in_flight: collections.deque[asyncio.Future[RemotingCommand]] = collections.deque()
    done = 0
    while True:
        more = loop.time() < until
        while more and len(in_flight) < window:
            in_flight.append(conn.request(RemotingCommand.request(BENCH_CODE, header, b"x" * 16), REQUEST_TIMEOUT_MS))
        if not in_flight:
            return done
        await in_flight.popleft()
        done += 1


async def measure(addr: str, connections: int, window: int, seconds: float) -> tuple[int, float, float]:
    """Requests answered, wall seconds and client CPU seconds over one run."""
    clients = [RemotingClient() for _ in range(connections)]
    conns = [await c.connection(addr) for c in clients]
    await _drive(conns[0], window, asyncio.get_running_loop().time() + 0.3)
    started, cpu_started = time.perf_counter(), time.process_time()
    until = asyncio.get_running_loop().time() + seconds
    counts = await asyncio.gather(*(_drive(c, window, until) for c in conns))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    for c in clients:
        await c.close()
    return sum(counts), elapsed, cpu


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skiff bench transport", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each run sends (default 3)")
    parser.add_argument("--window", type=int, default=256, help="requests in flight per connection (default 256)")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 8],
                        help="one run per number of client connections (default 1 8)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child,), daemon=True)
    proc.start()
    addr = f"127.0.0.1:{parent.recv()}"
    try:
        for n in args.connections:
            server_cpu = _server_cpu_s(parent)
            count, wall_s, client_cpu_s = run_coroutine(measure(addr, n, args.window, args.seconds))
            server_cpu = _server_cpu_s(parent) - server_cpu
            print(f"{n} connection(s), {args.window} in flight each: {count / wall_s:,.0f} requests/s; "
                  f"CPU per request: client {client_cpu_s / count * 1e6:.1f} us, "
                  f"server {server_cpu / count * 1e6:.1f} us")
    finally:
        parent.send("stop")
        proc.join(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
