"""``skiff chaos``: an OpenChaos-style run of a controller-mode broker group in network
namespaces under faults (skiff.testing.chaos, docs/reliability.md). It starts its processes
with the test harness, as the benchmarks do, so the command reaches the harness through
here (the CLI never imports the harness itself). Needs root (namespaces, tmpfs) and etcd.

Exit status 0 when nothing acknowledged (SEND_OK) was lost and no order was broken, 1
otherwise, 2 for a bad option."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skiff.testing.chaos.faults import all_faults
from skiff.testing.chaos.foreign import CLIENTS, ForeignClientMissing
from skiff.testing.chaos.report import format_text
from skiff.testing.chaos.run import ChaosOptions, recheck, run_chaos

UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600}


def duration_s(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h``, ``2.5m`` in seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if m is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (say 90s, 15m or 1h)")
    return float(m[1]) * UNITS_S[m[2]]


def fault_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in all_faults()]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown faults {', '.join(unknown)}; known: {', '.join(all_faults())}")
    return names


def client_list(text: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in CLIENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown clients {', '.join(unknown) or '(none given)'}; "
                                         f"known: {', '.join(CLIENTS)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    doc = (__doc__ or "").split("\n\n")
    parser = argparse.ArgumentParser(prog="skiff chaos", description=doc[0], epilog=doc[-1])
    parser.add_argument("--duration", type=duration_s, default=60.0, help="how long faults are injected (default 60s)")
    parser.add_argument("--fault-interval", type=duration_s, default=8.0,
                        help="a fault every this long (default 8s)")
    parser.add_argument("--fault-hold", type=duration_s, default=None,
                        help="how long each fault lasts before its recovery (default: half the interval)")
    parser.add_argument("--mode", choices=["SYNC_MASTER", "ASYNC_MASTER"], default="SYNC_MASTER")
    parser.add_argument("--out", type=Path, required=True, help="directory for history, results and plot")
    parser.add_argument("--recheck", action="store_true",
                        help="run no cluster: check OUT/history again and rewrite OUT's results and plot")
    parser.add_argument("--faults", type=fault_list, default=list(all_faults()),
                        help=f"comma-separated, from: {', '.join(all_faults())} (default all)")
    parser.add_argument("--keys", type=int, default=8, help="sharding keys, one sender each (default 8)")
    parser.add_argument("--rate", type=float, default=40.0, help="messages a second, all keys (default 40)")
    parser.add_argument("--lease-ms", type=int, default=10_000,
                        help="the brokers' controller lease (default 10000, the brokers' default)")
    parser.add_argument("--drain", type=duration_s, default=120.0,
                        help="longest wait for the consumers to read every SEND_OK message at the end (default 120s)")
    parser.add_argument("--seed", type=int, default=1, help="the fault order and targets (default 1)")
    parser.add_argument("--clients", type=client_list, default=["python"],
                        help="comma-separated, which clients send, each with --keys senders at --rate: python "
                             "(ours), cpp (RocketMQ's C++ client, under SKIFF_CPP_PYTHON), rmq5 (the 5.x client "
                             "over gRPC, under SKIFF_RMQ5_PYTHON) (default python)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.recheck:
        return report(recheck(args.out), args.out)
    if os.geteuid() != 0:
        parser.error("network namespaces and tmpfs mounts need root")
    if shutil.which("etcd") is None:
        parser.error("etcd is not installed (Debian: apt-get install etcd-server, or `make etcd`)")
    opts = ChaosOptions(args.out, args.duration, args.fault_interval, args.fault_hold, args.mode, args.faults,
                        args.keys, args.rate, args.lease_ms, args.drain, args.seed, clients=args.clients)
    logging.getLogger("skiff.client").setLevel(logging.ERROR)  # every failover's warnings: the history has them
    try:
        return report(asyncio.run(run_chaos(opts)), args.out)
    except ForeignClientMissing as exc:
        parser.error(str(exc))


def report(results: dict[str, Any], out: Path) -> int:
    print(format_text(results), end="")
    print(f"history, results.json, results.txt, plot.png and logs/ in {out}")
    return 0 if results["ok"] else 1
