"""Failover chaos run: ``skiff bench failover [--kills 5]``.

Starts a single-member etcd, a NameServer and two brokers of one brokerName in
controller mode (SYNC_MASTER, ``--lease-ms`` lease), runs ``--keys`` producers
that each send numbers 0, 1, 2, ... to their own queue of the current master and
resend until answered SEND_OK, and kill -9s the master ``--kills`` times (each
time once both brokers are in sync, restarting it after a successor is elected).
Then it reads every queue back and reports the failover times (kill → the other
broker reports itself master), SEND_OK messages lost (must be 0), duplicates (resends
whose first answer was lost), keys out of order and whether the two brokers hold
the same messages. Exit status 1 if anything acknowledged was lost or reordered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from skiff.testing.etcd import Etcd
from skiff.testing.failover import KeyedSender, check_delivery, kill_masters, master_of
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually


async def chaos(group: ControllerGroup, keys: int, kills: int) -> dict[str, object]:
    await eventually(lambda: master_of(group), 20, "a master elected")
    sender = KeyedSender(group, keys)
    tasks = [asyncio.create_task(sender.run(k)) for k in range(keys)]
    try:
        failovers = await kill_masters(group, sender, kills)
    finally:
        sender.running = False
        await asyncio.gather(*tasks)
    report = await check_delivery(group, sender)
    return {"failover_s": [round(f, 2) for f in failovers], "failover_p50_s": round(statistics.median(failovers), 2),
            **report}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--keys", type=int, default=4)
    parser.add_argument("--lease-ms", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-failover-") as tmp:
        root = Path(tmp)
        with Etcd(root / "etcd") as etcd, ControllerGroup(root, etcd.endpoint, lease_ms=args.lease_ms,
                                                          broker_args=["--slaveTimeout=1000"]) as group:
            result = asyncio.run(chaos(group, args.keys, args.kills))
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0 if result["lost"] == 0 and not result["out_of_order_keys"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
