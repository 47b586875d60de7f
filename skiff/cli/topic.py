"""``skiff topic create|update|delete|list|route|status|compact-status|compact``.

    skiff topic create -t Orders [-q 8] [-r N -w N] [-p 6] [-o] [-c CLUSTER | -b HOST:PORT]
    skiff topic create -t Prices --cleanup-policy compaction [--attr delete.retention.ms=3600000]
    skiff topic status -t Orders --json
    skiff topic compact-status -t Prices
    skiff topic compact -t Prices
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

from skiff.cli import tier
from skiff.cli.admin import bounded, command, emit, family, print_table, with_admin
from skiff.client.admin import DEFAULT_QUEUE_NUMS, TOPIC_PERMS
from skiff.client.admin_results import BrokerCompaction
from skiff.common.errors import ConfigError
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.protocol.bodies.topic import perm_text
from skiff.protocol.bodies.topic_attributes import (
    CLEANUP_POLICY,
    DELETE_RETENTION_MS,
    RETENTION_LOCAL_MS,
    RETENTION_TIERED_MS,
    TIERED_STORAGE,
    CleanupPolicy,
)


queue_count = bounded(1, QUEUES_PER_TOPIC_MAX)
"""A queue count: what the broker accepts, less an unusable 0."""


def register(sub: Any) -> None:
    topics = family(sub, "topic", "create, change, delete and inspect topics")
    for name, text in (("create", "create a topic on every master (of a cluster) or on one broker"),
                       ("update", "change a topic's queue counts, permission or order flag (same as create)")):
        cmd = command(topics, name, text, topic_create)
        cmd.add_argument("-t", "--topic", required=True)
        cmd.add_argument("-q", "--queue-nums", type=queue_count, default=DEFAULT_QUEUE_NUMS,
                         help=f"read and write queues per broker, 1 to {QUEUES_PER_TOPIC_MAX} "
                              f"(default {DEFAULT_QUEUE_NUMS})")
        cmd.add_argument("-r", "--read-queue-nums", type=queue_count, help="read queues (default: --queue-nums)")
        cmd.add_argument("-w", "--write-queue-nums", type=queue_count, help="write queues (default: --queue-nums)")
        cmd.add_argument("-p", "--perm", type=int, choices=TOPIC_PERMS, default=6,
                         help="2 write, 4 read, 6 both (default 6)")
        cmd.add_argument("-o", "--order", action="store_true", help="an order topic")
        cmd.add_argument("--cleanup-policy", type=str.upper, choices=[p.value for p in CleanupPolicy],
                         help="DELETE (records expire with their CommitLog files) or COMPACTION (the latest "
                              "message of each key is kept); default: unchanged, DELETE for a new topic")
        cmd.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                         help=f"a topic attribute ({CLEANUP_POLICY}, {DELETE_RETENTION_MS}, {TIERED_STORAGE}, "
                              f"{RETENTION_LOCAL_MS}, {RETENTION_TIERED_MS}); repeatable")
        _where(cmd)
    cmd = command(topics, "delete", "delete a topic from the brokers and the NameServers", topic_delete)
    cmd.add_argument("-t", "--topic", required=True)
    cmd.add_argument("-c", "--cluster", help="only from this cluster's brokers")
    command(topics, "list", "list every topic the NameServers know", topic_list)
    cmd = command(topics, "route", "show a topic's route: queues per broker and broker addresses", topic_route)
    cmd.add_argument("-t", "--topic", required=True)
    cmd = command(topics, "status", "show every queue's min and max offset and last store time", topic_status)
    cmd.add_argument("-t", "--topic", required=True)
    cmd = command(topics, "compact-status", "show a topic's cleanup policy and each queue's compaction state",
                  topic_compact_status)
    cmd.add_argument("-t", "--topic", required=True)
    cmd = command(topics, "compact", "compact every queue of a compacted topic now", topic_compact)
    cmd.add_argument("-t", "--topic", required=True)
    tier.register(topics)


def _where(cmd: argparse.ArgumentParser) -> None:
    where = cmd.add_mutually_exclusive_group()
    where.add_argument("-c", "--cluster", help="every master of this cluster (default: of every cluster)")
    where.add_argument("-b", "--broker", metavar="HOST:PORT", help="only this broker")


def _attributes(args: argparse.Namespace) -> dict[str, str]:
    attrs = {}
    for item in args.attr:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise ConfigError(f"--attr {item!r}: write NAME=VALUE, e.g. {DELETE_RETENTION_MS}=3600000")
        attrs[name.strip()] = value.strip()
    if args.cleanup_policy:
        attrs[CLEANUP_POLICY] = args.cleanup_policy
    return attrs


def topic_create(args: argparse.Namespace) -> int:
    attributes = _attributes(args)
    addrs = with_admin(args, lambda a: a.create_topic(
        args.topic, queue_nums=args.queue_nums, read_queue_nums=args.read_queue_nums,
        write_queue_nums=args.write_queue_nums, perm=args.perm, order=args.order, cluster=args.cluster,
        broker_addr=args.broker, attributes=attributes))
    return emit(args, {"topic": args.topic, "brokers": addrs}, ("TOPIC", "BROKER"),
                [(args.topic, a) for a in addrs])


def topic_delete(args: argparse.Namespace) -> int:
    addrs = with_admin(args, lambda a: a.delete_topic(args.topic, cluster=args.cluster))
    return emit(args, {"topic": args.topic, "brokers": addrs}, ("DELETED", "BROKER"),
                [(args.topic, a) for a in addrs])


def topic_list(args: argparse.Namespace) -> int:
    topics = with_admin(args, lambda a: a.topic_list())
    return emit(args, topics, ("TOPIC",), [(t,) for t in topics])


def topic_route(args: argparse.Namespace) -> int:
    route = with_admin(args, lambda a: a.topic_route(args.topic))
    addrs = {b.broker_name: b for b in route.broker_datas}
    rows = [(q.broker_name, q.read_queue_nums, q.write_queue_nums, perm_text(q.perm),
             addrs[q.broker_name].master_addr if q.broker_name in addrs else "",
             ",".join(f"{i}={a}" for i, a in sorted(addrs[q.broker_name].broker_addrs.items()) if i)
             if q.broker_name in addrs else "")
            for q in sorted(route.queue_datas, key=lambda q: q.broker_name)]
    return emit(args, route, ("BROKER", "READ", "WRITE", "PERM", "MASTER", "SLAVES"), rows)


def topic_status(args: argparse.Namespace) -> int:
    async def work(admin: Any) -> tuple[Any, list[BrokerCompaction]]:
        return await admin.topic_status(args.topic), [] if args.json else await admin.compaction(args.topic)

    queues, compaction = with_admin(args, work)
    rows = [(q.mq.broker_name, q.mq.queue_id, q.min_offset, q.max_offset, format_time_ms(q.last_update_timestamp))
            for q in queues]
    code = emit(args, queues, ("BROKER", "QUEUE", "MIN OFFSET", "MAX OFFSET", "LAST UPDATED"), rows)
    if any(b.state is not None and b.state.cleanup_policy == CleanupPolicy.COMPACTION for b in compaction):
        print(f"{CLEANUP_POLICY}=COMPACTION: offsets below each queue's cleaned point have gaps "
              f"(skiff topic compact-status -t {args.topic})")
    return code


def topic_compact_status(args: argparse.Namespace) -> int:
    return _compaction(args, run=False)


def topic_compact(args: argparse.Namespace) -> int:
    return _compaction(args, run=True)


def _compaction(args: argparse.Namespace, *, run: bool) -> int:
    answers: list[BrokerCompaction] = with_admin(args, lambda a: a.compaction(args.topic, run=run))
    if args.json:
        emit(args, answers, (), [])
    else:
        rows = [(b.broker_name, b.state.cleanup_policy, q.queue_id, q.start_offset, q.cleaned_offset, q.max_offset,
                 q.segment_records, f"{q.dirty_ratio:.2f}", format_time_ms(q.last_run_ms), q.bytes_reclaimed)
                for b in answers if b.state for q in b.state.queues]
        print_table(("BROKER", "POLICY", "QUEUE", "START", "CLEANED", "MAX", "KEPT", "DIRTY RATIO", "LAST RUN",
                     "BYTES RECLAIMED"), rows)
        for b in answers:
            if b.state and run:
                print(f"{b.broker_name}: compacted {len(b.state.runs)} queue(s): kept "
                      f"{sum(r.records_kept for r in b.state.runs)} of {sum(r.records_read for r in b.state.runs)} "
                      f"records read, {sum(r.bytes_reclaimed for r in b.state.runs)} bytes reclaimed")
    for b in answers:
        if b.error is not None:
            print(f"skiff: {b.broker_name} ({b.addr}): {b.error}", file=sys.stderr)
    return 1 if any(b.error for b in answers) or not answers else 0


def format_time_ms(ms: int) -> str:
    """Local time to the millisecond, or '-' for 0 (never)."""
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).isoformat(sep=" ", timespec="milliseconds")
