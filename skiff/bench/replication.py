"""Replication benchmark: ``skiff bench replication``.

For each mode — a master alone, ASYNC_MASTER with one slave, SYNC_MASTER with one
slave — starts a fresh NameServer, master (and slave) as ``skiff broker``
processes with ASYNC_FLUSH, and drives the master with `skiff.bench.broker_load`'s
produce phase: ``--producers`` connections each sending one message at a time
(``--inflight`` 1: 16 producers, as the seeds' comparison) for ``--seconds``,
with 100 B and 1 KiB bodies. Prints msg/s and the master's CPU per message;
SYNC_MASTER's cost is the difference at the same offered load. ``--json`` prints
the rows as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from skiff.bench.broker_load import Broker, Plan, create_topic, produce
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

MODES = {"none": ("ASYNC_MASTER", 0), "async": ("ASYNC_MASTER", 1), "sync": ("SYNC_MASTER", 1)}


def run_mode(root: Path, mode: str, plan: Plan, batched: bool) -> dict[str, object]:
    role, slaves = MODES[mode]
    with HAGroup(root, role=role, slaves=slaves, broker_args=["--flushDiskType=ASYNC_FLUSH"]) as group:
        broker = Broker(group.master_addr, group.proc(0).pid)

        async def main() -> dict[str, object]:
            await create_topic(broker)
            if slaves:
                await eventually(lambda: _slave_connected(broker.addr), 30, "the slave connecting")
            rate = await produce(broker, plan, batched)
            return {"mode": mode, "body_bytes": plan.body_bytes, "batch": plan.batch if batched else 1,
                    "messages_per_s": round(rate.per_s), "master_cpu_us_per_message":
                    round(rate.broker_cpu_us_per_message, 1), "messages": rate.messages}
        return asyncio.run(main())


async def _slave_connected(addr: str) -> bool:
    wire = BrokerWire(addr)
    try:
        resp = await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return KVTable.from_json(resp.body).table.get("haSlaveCount") == "1"
    finally:
        await wire.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench replication", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1, help="requests in flight per producer")
    parser.add_argument("--sizes", default="100,1024", help="body sizes, comma-separated")
    parser.add_argument("--modes", default="none,async,sync")
    parser.add_argument("--batch", type=int, default=0, help="send batches of this many (0: single messages)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="skiff-bench-ha-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            for mode in args.modes.split(","):
                plan = Plan(args.seconds, args.producers, max(1, args.batch), args.inflight, size)
                row = run_mode(Path(tmp) / f"{mode}-{size}", mode, plan, batched=args.batch > 0)
                rows.append(row)
                if not args.json:
                    print(f"{mode:6} {size:>5} B batch {row['batch']:>3}: {row['messages_per_s']:>8,} msg/s  "
                          f"master CPU {row['master_cpu_us_per_message']} us/msg", flush=True)
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
