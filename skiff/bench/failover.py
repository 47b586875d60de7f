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

``statuses`` counts every send's answer by name: ``SEND_OK``; ``failed (no
answer/timeout)`` when the connection died with the killed master or no answer
came within 3 s; ``FLUSH_SLAVE_TIMEOUT`` / ``SLAVE_NOT_AVAILABLE`` when the
master stored it without its slave's copy; ``refused: NAME (code)`` for a
broker's refusal (a broker that is not master any more). Only SEND_OK counts
as acknowledged; every other answer is resent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from skiff.protocol.codes import ResponseCode
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
    report["statuses"] = status_names(report["statuses"])
    return {"failover_s": [round(f, 2) for f in failovers], "failover_p50_s": round(statistics.median(failovers), 2),
            **report}


NO_ANSWER = -1
"""What `KeyedSender` counts for a send that got no answer (the connection died with the
master, or 3 s passed): the number is sent again, to the next master."""
NO_ANSWER_NAME = "failed (no answer/timeout)"
STATUS_NAMES: dict[int, str] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
"""A send's answer as its SendStatus: stored (SEND_OK), or stored without the flush or the slave's
copy SYNC_MASTER waits for (resent, as it is not SEND_OK)."""


def status_name(code: int) -> str:
    """``SEND_OK``, another SendStatus, ``failed (no answer/timeout)``, or a refusal's response code
    name and number (``refused: SERVICE_NOT_AVAILABLE (14)``: a broker that is not master any more)."""
    if code == NO_ANSWER:
        return NO_ANSWER_NAME
    if code in STATUS_NAMES:
        return STATUS_NAMES[code]
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = "UNKNOWN"
    return f"refused: {name} ({code})"


def status_names(statuses: Mapping[int, int]) -> dict[str, int]:
    """Send answers counted by name, the most frequent first."""
    named: dict[str, int] = {}
    for code, count in statuses.items():
        named[status_name(code)] = named.get(status_name(code), 0) + count
    return dict(sorted(named.items(), key=lambda kv: -kv[1]))


def format_report(result: Mapping[str, object]) -> str:
    """The report as ``key: value`` lines; the statuses as ``NAME: count, ...``."""
    lines = []
    for key, value in result.items():
        if key == "statuses" and isinstance(value, Mapping):
            value = ", ".join(f"{name}: {count}" for name, count in value.items()) or "-"
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    doc = (__doc__ or "").split("\n\n")
    parser = argparse.ArgumentParser(prog="skiff bench failover", description=doc[0],
                                     epilog=doc[-1].replace("``", ""))
    parser.add_argument("--kills", type=int, default=5, help="times the master is killed (default 5)")
    parser.add_argument("--keys", type=int, default=4,
                        help="producers, each sending its numbers to its own queue (default 4)")
    parser.add_argument("--lease-ms", type=int, default=2000,
                        help="the brokers' controller lease: how soon a dead master's lease expires (default 2000)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skiff-bench-failover-") as tmp:
        root = Path(tmp)
        with Etcd(root / "etcd") as etcd, ControllerGroup(root, etcd.endpoint, lease_ms=args.lease_ms,
                                                          broker_args=["--slaveTimeout=1000"]) as group:
            result = asyncio.run(chaos(group, args.keys, args.kills))
    print(json.dumps(result) if args.json else format_report(result))
    return 0 if result["lost"] == 0 and not result["out_of_order_keys"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
