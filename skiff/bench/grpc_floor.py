"""gRPC per-call floor: ``skiff bench grpc_floor`` — what grpcio's server costs for one unary
call whose handler does nothing, in each server shape.

Why: a 5.x client sends one message per SendMessage and acks one message per AckMessage,
so grpcio's own cost per call bounds what any broker-side work can reach. This bench
measures that bound apart from Skiff: a child process serves an empty unary method
(bytes in, bytes out, no protobuf) and the parent drives it with ``--in-flight`` calls
outstanding from grpcio's asyncio client, carrying the ``x-mq-client-id`` header the
5.x clients send. The figure to read is the server's CPU per call (user + system of
the child process, every thread of grpcio's core included); compare it with
``skiff bench grpc``'s broker CPU per message for the same load.

Shapes: ``aio`` (grpcio's asyncio server on asyncio's loop, as the broker ran it but
for uvloop), ``aio-uvloop`` (the broker's own loop), ``threads`` (grpcio's synchronous
server with a pool of ``--workers`` threads), ``skiff`` (Skiff's own HTTP/2 door,
skiff.transport.grpc_server, on uvloop: what the broker serves by default now).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent import futures

import grpc

from skiff.bench.producer import _ProcessCpu
from skiff.testing.processes import free_port

SERVICE = "skiff.bench.Floor"
METHOD = f"/{SERVICE}/Call"
SHAPES = ("aio", "aio-uvloop", "threads", "skiff")


def _empty(request: bytes, context: object) -> bytes:
    return b""


async def _empty_async(request: bytes, context: object) -> bytes:
    return b""


def _handlers(fn: object) -> list[grpc.GenericRpcHandler]:
    return [grpc.method_handlers_generic_handler(SERVICE, {"Call": grpc.unary_unary_rpc_method_handler(fn)})]


def serve(shape: str, port: int, workers: int) -> None:
    """The child: serve the empty method until killed; print one line once listening."""
    target = f"127.0.0.1:{port}"
    if shape == "threads":
        server = grpc.server(futures.ThreadPoolExecutor(workers), handlers=_handlers(_empty))
        server.add_insecure_port(target)
        server.start()
        print("ready", flush=True)
        server.wait_for_termination()
        return

    async def run_skiff() -> None:
        from skiff.transport.grpc_server import GrpcServer, Kind, Method

        door = GrpcServer("127.0.0.1", port, SERVICE, {"Call": Method(Kind.UNARY, bytes, bytes, _empty_async)},
                          1024 * 1024)
        await door.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    async def run() -> None:
        aio_server = grpc.aio.server(handlers=_handlers(_empty_async))
        aio_server.add_insecure_port(target)
        await aio_server.start()
        print("ready", flush=True)
        await aio_server.wait_for_termination()

    if shape in ("aio-uvloop", "skiff"):
        import uvloop

        uvloop.run(run_skiff() if shape == "skiff" else run())
    else:
        asyncio.run(run())


async def drive(port: int, calls: int, in_flight: int, size: int) -> float:
    """Make `calls` calls with `in_flight` outstanding; the seconds they took."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        metadata = (("x-mq-client-id", "skiff-bench-floor"),)
        body = b"x" * size
        await call(body, metadata=metadata)
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await call(body, metadata=metadata)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - start


def measure(shape: str, calls: int, in_flight: int, size: int, workers: int) -> dict[str, float | str | None]:
    port = free_port()
    child = subprocess.Popen([sys.executable, "-m", "skiff.bench.grpc_floor", "--serve", shape, "--port", str(port),
                              "--workers", str(workers)], stdout=subprocess.PIPE, env=dict(os.environ))
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"the {shape} server did not start")
        cpu = _ProcessCpu(child.pid)
        cpu.mark()
        seconds = asyncio.run(drive(port, calls, in_flight, size))
        used = cpu.since_mark()
    finally:
        child.kill()
        child.wait()
    return {"shape": shape, "calls": calls, "calls_per_s": calls / seconds,
            "server_cpu_us_per_call": None if used is None else used / calls * 1e6}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench grpc_floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--calls", type=int, default=20_000, help="calls per shape (default 20000)")
    parser.add_argument("--in-flight", type=int, default=64, help="calls outstanding (default 64)")
    parser.add_argument("--size", type=int, default=100, help="request bytes (default 100)")
    parser.add_argument("--workers", type=int, default=8, help="threads of the synchronous server (default 8)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    parser.add_argument("--serve", choices=SHAPES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.workers)
        return 0
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}: choose from {', '.join(SHAPES)}")
    results = [measure(s, args.calls, args.in_flight, args.size, args.workers) for s in shapes]
    if args.json:
        print(json.dumps(results))
        return 0
    for r in results:
        cpu = r["server_cpu_us_per_call"]
        print(f"{r['shape']}: {r['calls']:,} empty unary calls, {r['calls_per_s']:,.0f} calls/s, "
              f"server CPU {'n/a' if cpu is None else f'{cpu:.1f} us'} per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
