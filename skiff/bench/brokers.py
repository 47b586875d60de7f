"""One broker against several on one host: ``skiff bench brokers [--brokers 1 2]``.

One Python process uses one core, so a bigger host runs one broker per core
(`skiff up --brokers N`, skiff.cli.up_brokers). For each count asked, this starts
``skiff up --brokers N`` (free ports, a temporary store, ASYNC_FLUSH, no dashboard or
metrics), then ``--producers`` producer processes at once (``skiff bench producer -n``:
each creates the topic on every broker of the cluster, 8 queues each, and spreads its
sends over all of them by the route, as any RocketMQ producer does), and prints the
summed msg/s and the brokers' CPU per message (psutil: user+system of every broker
process over the producers' run, start-up included, so slightly high).

Producers are processes of their own because a client is one core too; on a machine
with fewer cores than brokers plus producers, every figure is a share of the cores, and
the comparison says how the work spreads, not the host's ceiling.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import psutil

from skiff.testing.processes import SkiffProcess, free_port, start_skiff
from skiff.testing.up_ha import free_ports_apart

START_TIMEOUT_S = 60.0
CHILD = re.compile(r"^\s+(broker-[a-z]): pid (\d+),", re.M)


@dataclass(frozen=True, slots=True)
class Row:
    brokers: int
    producers: int
    messages: int
    msg_per_s: float
    broker_cpu_us_per_msg: float
    broker_cpu_s: float


def start_up(count: int, root: str, extra: Sequence[str]) -> tuple[SkiffProcess, str, list[int]]:
    """``skiff up --brokers count``; its NameServer address and the broker processes' pids."""
    base = free_ports_apart([o for i in range(count) for o in (10 * i, 10 * i + 1)])
    args = ["up", "--brokers", str(count), "--dir", root, "--namesrv-port", str(free_port()),
            "--broker-port", str(base), "--grpc-port", "0", "--metrics-port", "0", "--namesrv-metrics-port", "0",
            "--kafka-port", "0", "--no-dashboard", "--flushDiskType=ASYNC_FLUSH", *extra]
    proc = start_skiff(args, timeout_s=START_TIMEOUT_S)
    if count == 1:  # one broker runs in the up process itself, beside the NameServer
        proc.wait_for_line(r"skiff broker listening on", START_TIMEOUT_S)
        ns = proc.wait_for_line(r"skiff namesrv listening on \S+:(\d+)", START_TIMEOUT_S)[1]
        return proc, f"127.0.0.1:{ns}", [proc.pid]
    ns = proc.wait_for_line(rf"skiff up --brokers {count}: NameServer (\S+),", START_TIMEOUT_S)[1]
    return proc, ns, [int(m[2]) for m in CHILD.finditer(proc.output)]


def producer_command(ns: str, args: argparse.Namespace) -> list[str]:
    return [sys.executable, "-m", "skiff.bench.producer", "-n", ns, "--json", "--seconds", str(args.seconds),
            "--size", str(args.size), "--batch", str(args.batch), "--in-flight", str(args.in_flight)]


def measure(count: int, args: argparse.Namespace) -> Row:
    with tempfile.TemporaryDirectory(prefix="skiff-bench-brokers-") as root:
        proc, ns, pids = start_up(count, root, args.broker_arg)
        try:
            brokers = [psutil.Process(pid) for pid in pids]
            cpu0 = sum(sum(p.cpu_times()[:2]) for p in brokers)
            producers = [subprocess.Popen(producer_command(ns, args), stdout=subprocess.PIPE, text=True)
                         for _ in range(args.producers)]
            outputs = [p.communicate(timeout=args.seconds + START_TIMEOUT_S)[0] for p in producers]
            cpu_s = sum(sum(p.cpu_times()[:2]) for p in brokers) - cpu0
        finally:
            proc.stop()
    figures = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    messages = sum(f["messages"] for f in figures)
    return Row(count, args.producers, messages, round(sum(f["send_tps"] for f in figures)),
               round(cpu_s / messages * 1e6, 2) if messages else 0.0, round(cpu_s, 2))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench brokers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 2], metavar="N",
                        help="broker counts to measure, one run each (default 1 2)")
    parser.add_argument("--producers", type=int, default=2, help="producer processes (default 2)")
    parser.add_argument("--seconds", type=float, default=10.0, help="each producer's run (default 10)")
    parser.add_argument("--size", type=int, default=100, help="body bytes (default 100)")
    parser.add_argument("--batch", type=int, default=64, help="messages per send (default 64; 1: single sends)")
    parser.add_argument("--in-flight", type=int, default=8, help="sends outstanding per producer (default 8)")
    parser.add_argument("--broker-arg", action="append", default=[], metavar="--KEY=VALUE",
                        help="a broker.conf key for every broker")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for count in args.brokers:
        rows.append(measure(count, args))
        if not args.json:
            r = rows[-1]
            print(f"{r.brokers} broker(s), {r.producers} producer(s): {r.msg_per_s:,.0f} msg/s, broker CPU "
                  f"{r.broker_cpu_us_per_msg} us/msg ({r.messages:,} messages, load {_load()})", flush=True)
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
    return 0


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in psutil.getloadavg())


if __name__ == "__main__":
    raise SystemExit(main())
