"""What a LITE send costs when it reaches the broker that does not keep its lite topic:
``python -m skiff.bench.lite_forward``.

It starts a NameServer and two brokers on this host (each its own gRPC port, as
`skiff up --brokers 2` runs them), creates a LITE parent on both, and makes broker B keep
``--lites`` lite topics (their first message sent to B). Then, one send at a time
(``--sends`` each): every lite topic's next messages sent to B (stored where they arrive),
then to A (A does not hold them: it forwards each to B, skiff.broker.grpc.lite_peers,
asking B first only when its memory of who holds it is older than LITE_ROUTE_CACHE_S).
Prints, per phase, the median and 99th percentile send latency and each broker's CPU per
message (the steadier figure on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skiff.bench.producer import _ProcessCpu
from skiff.common.java_hash import consistent_hash, java_string_hash
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.transport.loop import run_coroutine

if TYPE_CHECKING:
    from skiff.testing.grpc_wire import GrpcWire

PARENT = "BenchLite"
QUEUES = 4


def kept_by_b(count: int) -> list[str]:
    """``count`` lite names whose 5.5 owner (consistent hash over both brokers' queues) is broker-b."""
    queues = sorted((name, i) for name in ("broker-a", "broker-b") for i in range(QUEUES))
    names = (f"bench-{i}" for i in range(10 * count + 10))
    return [n for n in names if queues[consistent_hash(java_string_hash(n), len(queues))][0] == "broker-b"][:count]


async def _phase(wire: GrpcWire, lites: list[str], sends: int, start_id: int,
                 cpus: dict[str, _ProcessCpu]) -> tuple[list[float], dict[str, float | None]]:
    """Send ``sends`` messages one at a time over ``lites`` in turn: their latencies and each
    broker's CPU seconds meanwhile."""
    for cpu in cpus.values():
        cpu.mark()
    latencies = []
    for n in range(sends):
        lite = lites[n % len(lites)]
        message = pb.Message(topic=pb.Resource(name=PARENT), body=b"x" * 128, system_properties=pb.SystemProperties(
            message_id=f"{start_id + n:032X}", message_type=pb.LITE, lite_topic=lite, body_encoding=pb.IDENTITY))
        began = time.perf_counter()
        sent = await wire.unary("SendMessage", rpc.SendMessageRequest(messages=[message]), rpc.SendMessageResponse)
        latencies.append(time.perf_counter() - began)
        if sent.status.code != pb.OK:
            raise SystemExit(f"send of {lite} refused: {sent.status.message}")
    return latencies, {name: cpu.since_mark() for name, cpu in cpus.items()}


def _line(what: str, latencies: list[float], cpu: dict[str, float | None]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    per = {name: "n/a" if s is None else f"{s * 1e6 / len(latencies):.0f}" for name, s in cpu.items()}
    return (f"{what}: {len(latencies)} sends, median {statistics.median(ms):.2f} ms, p99 "
            f"{ms[int(0.99 * (len(ms) - 1))]:.2f} ms; CPU per send: broker-a {per['broker-a']} us, "
            f"broker-b {per['broker-b']} us")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.lite_forward", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lites", type=int, default=20, help="lite topics B keeps (default 20)")
    parser.add_argument("--sends", type=int, default=2000, help="sends in each phase (default 2000)")
    args = parser.parse_args(argv)
    if args.lites < 1 or args.sends < 1:
        parser.error("--lites and --sends must be at least 1")
    from skiff.testing.grpc_wire import GrpcWire
    from skiff.testing.processes import free_port, start_broker, start_namesrv
    from skiff.testing.wire import BrokerWire

    lites = kept_by_b(args.lites)
    ports = {"broker-a": free_port(), "broker-b": free_port()}
    with tempfile.TemporaryDirectory(prefix="skiff-bench-lite-") as root, start_namesrv() as namesrv, \
            start_broker(Path(root) / "a", namesrv.addr, f"--grpcServerPort={ports['broker-a']}",
                         "--flushDiskType=ASYNC_FLUSH") as a, \
            start_broker(Path(root) / "b", namesrv.addr, f"--grpcServerPort={ports['broker-b']}",
                         "--flushDiskType=ASYNC_FLUSH", name="broker-b") as b:
        async def run() -> list[str]:
            for addr in (a.addr, b.addr):
                wire = BrokerWire(addr)
                try:
                    header = CreateTopicRequestHeader(PARENT, "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG",
                                                      attributes="+message.type=LITE")
                    await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                    await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                                    SubscriptionGroupConfig("BenchLiteGroup").to_json())
                finally:
                    await wire.close()
            to_a = GrpcWire(f"127.0.0.1:{ports['broker-a']}", "bench-lite")
            to_b = GrpcWire(f"127.0.0.1:{ports['broker-b']}", "bench-lite")
            cpus = {"broker-a": _ProcessCpu(a.pid), "broker-b": _ProcessCpu(b.pid)}
            try:
                for _ in range(100):  # until both routes name both brokers (B registered the parent)
                    route = await to_a.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=PARENT)),
                                             rpc.QueryRouteResponse)
                    if len({q.broker.name for q in route.message_queues}) == 2:
                        break
                    await asyncio.sleep(0.1)
                await _phase(to_b, lites, len(lites), 0, cpus)  # B keeps them from now on
                direct = await _phase(to_b, lites, args.sends, 10_000_000, cpus)
                forwarded = await _phase(to_a, lites, args.sends, 20_000_000, cpus)
                return [_line("sent to B, which keeps the lite topics", *direct),
                        _line("sent to A, forwarded to B", *forwarded)]
            finally:
                await to_a.close()
                await to_b.close()
        for line in run_coroutine(run()):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
