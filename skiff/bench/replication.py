"""Replication benchmark: ``skiff bench replication``.

For each mode — a master alone, ASYNC_MASTER with one slave, SYNC_MASTER with one
slave — starts a fresh NameServer, master (and slave) as ``skiff broker``
processes with ASYNC_FLUSH, and drives the master with `skiff.bench.broker_load`'s
produce phase: ``--producers`` connections each sending one message at a time
(``--inflight`` 1: 16 producers, as the seeds' comparison) for ``--seconds``,
with 100 B and 1 KiB bodies. Prints msg/s and the master's (and the slave's) CPU
per message. ``--json`` prints the rows as JSON.

``--rate N`` offers the same load to every mode instead: N single-message sends per
second in total, on a fixed schedule (open loop) over the ``--producers`` connections
in turn, for ``--seconds``. It reports the rate achieved (SUCCESS answers per second),
the send latency p50/p99 from each send's due time, and the master's and the slave's
CPU per message: SYNC_MASTER's cost against no replication at the same offered load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from skiff.bench.broker_load import Broker, Plan, create_topic, latency, produce
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

MODES = {"none": ("ASYNC_MASTER", 0), "async": ("ASYNC_MASTER", 1), "sync": ("SYNC_MASTER", 1)}


def run_mode(root: Path, mode: str, plan: Plan, batched: bool, offered: float = 0.0) -> dict[str, object]:
    """One mode's row: closed loop (``offered`` 0) or ``offered`` msg/s on a fixed schedule."""
    role, slaves = MODES[mode]
    with HAGroup(root, role=role, slaves=slaves, broker_args=["--flushDiskType=ASYNC_FLUSH"]) as group:
        broker = Broker(group.master_addr, group.proc(0).pid)
        slave = Broker(group.slave_addr(), group.proc(1).pid) if slaves else None

        async def main() -> dict[str, object]:
            await create_topic(broker)
            if slave is not None:
                await eventually(lambda: _slave_connected(broker.addr), 30, "the slave connecting")
            row: dict[str, object] = {"mode": mode, "body_bytes": plan.body_bytes,
                                      "batch": plan.batch if batched else 1}
            cpu0 = (broker.cpu_s(), slave.cpu_s() if slave else 0.0)
            if offered:
                t0 = time.monotonic()
                lat = await latency(broker, plan, False, offered, plan.connections)
                messages, seconds = lat.requests, time.monotonic() - t0
                row.update(offered_per_s=round(offered), p50_ms=round(lat.p50_ms, 2), p99_ms=round(lat.p99_ms, 2))
            else:
                rate = await produce(broker, plan, batched)
                messages, seconds = rate.messages, rate.seconds
            if slave is not None:
                await eventually(lambda: _slave_caught_up(broker.addr), 60, "the slave catching up")
            cpu = (broker.cpu_s() - cpu0[0], (slave.cpu_s() - cpu0[1]) if slave else 0.0)
            row.update(messages=messages, messages_per_s=round(messages / seconds),
                       master_cpu_us_per_message=_per_message(cpu[0], messages),
                       slave_cpu_us_per_message=_per_message(cpu[1], messages))
            return row
        return asyncio.run(main())


def _per_message(cpu_s: float, messages: int) -> float:
    return round(cpu_s / messages * 1e6, 1) if messages else 0.0


async def _runtime(addr: str) -> dict[str, str]:
    wire = BrokerWire(addr)
    try:
        return KVTable.from_json((await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
    finally:
        await wire.close()


async def _slave_connected(addr: str) -> bool:
    return (await _runtime(addr)).get("haSlaveCount") == "1"


async def _slave_caught_up(addr: str) -> bool:
    """The slave has acknowledged everything (its CPU then covers every message)."""
    table = await _runtime(addr)
    return table.get("haSlaveAckOffset") == table.get("commitLogMaxOffset")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench replication", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1, help="requests in flight per producer")
    parser.add_argument("--sizes", default="100,1024", help="body sizes, comma-separated")
    parser.add_argument("--modes", default="none,async,sync")
    parser.add_argument("--batch", type=int, default=0, help="send batches of this many (0: single messages)")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="offer this many single-message sends per second in total, open loop (0: closed loop)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="skiff-bench-ha-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            for mode in args.modes.split(","):
                plan = Plan(args.seconds, args.producers, max(1, args.batch), args.inflight, size)
                row = run_mode(Path(tmp) / f"{mode}-{size}", mode, plan, args.batch > 0 and not args.rate, args.rate)
                rows.append(row)
                if not args.json:
                    print(_line(row), flush=True)
    if args.json:
        print(json.dumps(rows))
    return 0


def _line(row: dict[str, object]) -> str:
    paced = (f" (offered {row['offered_per_s']:,}) p50 {row['p50_ms']} ms p99 {row['p99_ms']} ms"
             if "offered_per_s" in row else "")
    return (f"{row['mode']:6} {row['body_bytes']:>5} B batch {row['batch']:>3}: {row['messages_per_s']:>8,} msg/s"
            f"{paced}  master CPU {row['master_cpu_us_per_message']} us/msg"
            f"  slave CPU {row['slave_cpu_us_per_message']} us/msg")


if __name__ == "__main__":
    raise SystemExit(main())
