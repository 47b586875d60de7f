"""Requests per second of small request/response pairs over loopback.

    skiff bench transport [--seconds 3] [--window 256] [--connections 1 8]
                          [--tls disabled|permissive|enforcing [--plaintext-client]]

The server runs in a child process (its own core) and answers every request
from a synchronous handler; the client keeps ``window`` requests in flight on
each connection, so the figure is the transport's, not a round trip's. The CPU
time per request of each side is printed too: on a busy machine it says more
than the rate, which depends on how much of a core each side got. ``--tls`` serves the
port in that ``tls.server.mode`` with a self-signed pair, and the client connects with TLS
(in plaintext with ``--plaintext-client``: the cost of permissive's first-byte sniffing).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import tempfile
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection as Pipe

from skiff.protocol.command import RemotingCommand
from skiff.transport.client import RemotingClient
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine
from skiff.transport.server import RemotingServer
from skiff.transport.tls import TlsClientConfig, TlsMode, TlsSettings

BENCH_CODE = 10
REQUEST_TIMEOUT_MS = 30_000


def _answer(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    return req.response(ext_fields={"queueId": "1", "queueOffset": "42"})


def _tls_settings(mode: TlsMode, directory: str) -> TlsSettings:
    from skiff.transport.certificates import write_self_signed

    pair = write_self_signed(directory)
    return TlsSettings(tls_server_mode=mode, tls_server_cert_path=str(pair.cert_path),
                       tls_server_key_path=str(pair.key_path))


def _serve(pipe: Pipe, mode: TlsMode = TlsMode.DISABLED, cert_dir: str = "") -> None:
    """The server process: answers requests; tells its CPU time when asked, until "stop"."""

    def control() -> None:
        while pipe.recv() == "cpu":
            pipe.send(time.process_time())

    async def main() -> None:
        tls = _tls_settings(mode, cert_dir).server_tls() if mode is not TlsMode.DISABLED else None
        server = RemotingServer("127.0.0.1", 0, {BENCH_CODE: _answer}, tls=tls)
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


async def measure(addr: str, connections: int, window: int, seconds: float,
                  tls: TlsClientConfig | None = None) -> tuple[int, float, float]:
    """Requests answered, wall seconds and client CPU seconds over one run."""
    clients = [RemotingClient(tls=tls) for _ in range(connections)]
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
    parser.add_argument("--tls", choices=[m.value for m in TlsMode], default=TlsMode.DISABLED.value,
                        help="the server's tls.server.mode (default disabled; docs/tls.md)")
    parser.add_argument("--plaintext-client", action="store_true",
                        help="with --tls permissive: the client connects in plaintext")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    mode = TlsMode(args.tls)
    client_tls = TlsClientConfig() if mode is not TlsMode.DISABLED and not args.plaintext_client else None
    cert_dir = tempfile.TemporaryDirectory(prefix="skiff-bench-tls-")
    proc = ctx.Process(target=_serve, args=(child, mode, cert_dir.name), daemon=True)
    proc.start()
    addr = f"127.0.0.1:{parent.recv()}"
    try:
        for n in args.connections:
            server_cpu = _server_cpu_s(parent)
            count, wall_s, client_cpu_s = run_coroutine(measure(addr, n, args.window, args.seconds, client_tls))
            server_cpu = _server_cpu_s(parent) - server_cpu
            print(f"{n} connection(s), {args.window} in flight each: {count / wall_s:,.0f} requests/s; "
                  f"CPU per request: client {client_cpu_s / count * 1e6:.1f} us, "
                  f"server {server_cpu / count * 1e6:.1f} us")
    finally:
        parent.send("stop")
        proc.join(10)
        cert_dir.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
