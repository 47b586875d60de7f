"""``skiff topic tier status|upload``: a tiered topic's state per queue on each master.

    skiff topic tier status -t Orders [--json]
    skiff topic tier upload -t Orders      (upload what is sealed now, then show the state)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from skiff.cli.admin import command, emit, family, with_admin
from skiff.client.admin_results import BrokerTier

_HEADERS = ("BROKER", "QUEUE", "UPLOADED TO", "LOCAL MIN", "LOCAL MAX", "LAG", "LOCAL BYTES", "REMOTE FILES",
            "REMOTE ROWS", "REMOTE BYTES")


def register(topics: Any) -> None:
    """Add ``tier`` under the ``topic`` family."""
    tier = family(topics, "tier", "tiered storage: a topic's state in the tier, uploads now")
    cmd = command(tier, "status", "show each queue's tier state: uploaded up to, bytes local and remote, lag",
                  tier_status)
    cmd.add_argument("-t", "--topic", required=True)
    cmd = command(tier, "upload", "upload a tiered topic's sealed messages now, then show its state", tier_upload)
    cmd.add_argument("-t", "--topic", required=True)


def tier_status(args: argparse.Namespace) -> int:
    return _tier(args, upload=False)


def tier_upload(args: argparse.Namespace) -> int:
    return _tier(args, upload=True)


def _tier(args: argparse.Namespace, *, upload: bool) -> int:
    answers: list[BrokerTier] = with_admin(args, lambda a: a.tier(args.topic, upload=upload))
    rows = [(b.broker_name, q.queue_id, q.uploaded_to, q.local_min_offset, q.local_max_offset, q.lag_messages,
             q.local_bytes, q.remote_files, q.remote_rows, q.remote_bytes)
            for b in answers if b.state for q in b.state.queues]
    emit(args, answers, _HEADERS, rows)
    if not args.json:
        for b in answers:
            if b.state is not None:
                flag = "tiered.storage=true" if b.state.tiered else "tiered.storage is off"
                print(f"{b.broker_name}: {flag}, tier {b.state.url}, retention.local.ms={b.state.retention_local_ms}, "
                      f"retention.tiered.ms={b.state.retention_tiered_ms}")
    for b in answers:
        if b.error is not None:
            print(f"skiff: {b.broker_name} ({b.addr}): {b.error}", file=sys.stderr)
    return 1 if any(b.error for b in answers) or not answers else 0
