"""``skiff timer slots`` and ``skiff timer cancel``: the broker timer's admin (Skiff brokers only).

    skiff timer slots [-c CLUSTER | -b HOST:PORT]
    skiff timer cancel 7F0000016B54CF2DCC5D6B293F41B556

``cancel`` exits 0 when the message will not be delivered (CANCELLED, or
ALREADY_CANCELLED by an earlier cancel) and 1 otherwise (ALREADY_DELIVERED,
NOT_FOUND, or a broker that did not answer), printing why.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from skiff.cli.admin import command, emit, family, print_json, print_table, with_admin
from skiff.cli.topic import format_time_ms
from skiff.client.admin_results import BrokerTimer, CancelScheduledResult
from skiff.protocol.bodies.timer import CancelStatus

WHY_NOT = {
    CancelStatus.ALREADY_DELIVERED: "it was already delivered to its topic (nothing is undone)",
    CancelStatus.NOT_FOUND: "no broker holds a scheduled message with this id",
}


def register(sub: Any) -> None:
    timer = family(sub, "timer", "scheduled (delayed) messages on the brokers' timers")
    slots = command(timer, "slots", "scheduled messages per time slot, and each timer's counters", timer_slots)
    where = slots.add_mutually_exclusive_group()
    where.add_argument("-c", "--cluster", help="only the masters of this cluster")
    where.add_argument("-b", "--broker", metavar="HOST:PORT", help="only this broker")
    cancel = command(timer, "cancel", "cancel a scheduled message so it is never delivered", timer_cancel)
    cancel.add_argument("msg_id", metavar="MSG_ID", help="the msg id (UNIQ_KEY) or offset msg id its send returned")


def timer_slots(args: argparse.Namespace) -> int:
    timers: list[BrokerTimer] = with_admin(args, lambda a: a.timer_slots(cluster=args.cluster,
                                                                         broker_addr=args.broker))
    if args.json:
        return emit(args, timers, (), [])
    rows = [(t.broker_name, format_time_ms(s.slot_start_ms), format_time_ms(s.slot_start_ms + t.slot_ms),
             s.scheduled, "yes" if s.loaded else "no") for t in timers for s in t.slots]
    print_table(("BROKER", "SLOT START", "SLOT END", "SCHEDULED", "IN WHEEL"), rows)
    print()
    for t in timers:
        print(_summary(t))
    return 1 if any(t.error for t in timers) else 0


def _summary(t: BrokerTimer) -> str:
    if t.error is not None:
        return f"{t.broker_name} ({t.addr}): no answer: {t.error}"
    s = t.stats
    return (f"{t.broker_name} ({t.addr}): {t.scheduled} scheduled in {len(t.slots)} slot(s); since start "
            f"{s.delivered} delivered, {s.cancelled} cancelled, {s.dropped} dropped; lateness p50 "
            f"{s.lateness_p50_ms:.0f} ms, p99 {s.lateness_p99_ms:.0f} ms, max {s.lateness_max_ms:.0f} ms")


def timer_cancel(args: argparse.Namespace) -> int:
    result: CancelScheduledResult = with_admin(args, lambda a: a.cancel_scheduled(args.msg_id))
    if args.json:
        print_json(result)
    else:
        rows = [(o.broker_name, o.timer_id, format_time_ms(o.due_ms), o.status.name) for o in result.outcomes]
        if rows:
            print_table(("BROKER", "TIMER ID", "DUE", "STATUS"), rows)
        print(f"{result.msg_id}: {result.status.name}")
    for failure in result.failures:
        print(f"skiff: {failure}", file=sys.stderr)
    if result.will_not_be_delivered:
        return 0
    if result.status in WHY_NOT:
        print(f"skiff: cannot cancel {result.msg_id}: {WHY_NOT[result.status]}", file=sys.stderr)
    return 1
