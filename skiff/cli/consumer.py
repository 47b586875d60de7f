"""``skiff consumer create|update|delete|progress|connections|reset-offset``.

    skiff consumer create -g orders-consumer --orderly true --retry-max-times 5
    skiff consumer update -g orders-consumer --consume-enable false
    skiff consumer create -g lite-group --attributes +lite.bind.topic=Orders,+lite.sub.client.quota=100
    skiff consumer progress -g orders-consumer [-t Orders]
    skiff consumer reset-offset -g orders-consumer -t Orders --timestamp 2024-05-01T12:00:00
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from skiff.cli.admin import bounded, command, emit, family, print_table, with_admin
from skiff.cli.topic import format_time_ms
from skiff.client.errors import ClientError
from skiff.common.times import parse_time_ms
from skiff.protocol.bodies.admin import GroupRetryPolicy, SubscriptionGroupConfig
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.group_attributes import parse_changes

LATEST = -1
"""The timestamp that resets to the end of every queue."""


def register(sub: Any) -> None:
    groups = family(sub, "consumer", "consumer groups: settings, progress, members, offsets")
    cmd = command(groups, "create", "create a consumer group on every master (of a cluster), or replace its "
                  "settings: RocketMQ's defaults for those not given", consumer_create)
    _group_settings(cmd, create=True)
    cmd = command(groups, "update", "change only the settings given of a consumer group on every master "
                  "(of a cluster), keeping the others", consumer_update)
    _group_settings(cmd, create=False)
    cmd = command(groups, "delete", "delete a consumer group, its offsets and its retry and DLQ topics",
                  consumer_delete)
    cmd.add_argument("-g", "--group", required=True)
    cmd.add_argument("-c", "--cluster")
    cmd = command(groups, "progress", "per queue: broker offset, consumer offset, lag", consumer_progress)
    cmd.add_argument("-g", "--group", required=True)
    cmd.add_argument("-t", "--topic", help="only this topic")
    cmd = command(groups, "connections", "the group's live clients and subscriptions", consumer_connections)
    cmd.add_argument("-g", "--group", required=True)
    cmd = command(groups, "reset-offset", "move the group's offsets on a topic to a point in time",
                  consumer_reset_offset)
    cmd.add_argument("-g", "--group", required=True)
    cmd.add_argument("-t", "--topic", required=True)
    cmd.add_argument("--timestamp", required=True, type=parse_timestamp_ms,
                     help="ms since the epoch, an ISO time (2024-05-01T12:00:00), 'now', or -1 for the end")
    cmd.add_argument("--no-force", action="store_true", help="only move offsets backwards")


def parse_bool(text: str) -> bool:
    """``true`` or ``false``, as mqadmin's options take them."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return value == "true"


def parse_retry_policy(text: str) -> GroupRetryPolicy:
    try:
        return GroupRetryPolicy.from_json(text.encode())
    except BodyError as exc:
        raise argparse.ArgumentTypeError(f"not a retry policy: {exc}") from None


def parse_attributes(text: str) -> dict[str, str | None]:
    """mqadmin's ``+a=b,+c=d,-e``: set a and c, remove e."""
    try:
        return parse_changes(text)
    except BodyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_timestamp_ms(text: str) -> int:
    """``1714560000000``, ``-1``, ``now`` or an ISO-8601 time (local time unless it has an offset)."""
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def consumer_create(args: argparse.Namespace) -> int:
    settings = _chosen(args)
    addrs = with_admin(args, lambda a: a.create_consumer_group(args.group, cluster=args.cluster,
                                                               broker_addr=args.broker, **settings))
    return emit(args, {"group": args.group, "brokers": addrs}, ("GROUP", "BROKER"), [(args.group, a) for a in addrs])


def consumer_update(args: argparse.Namespace) -> int:
    settings = _chosen(args)
    if not settings:
        raise ClientError("give at least one setting to change (see skiff consumer update --help)")
    addrs = with_admin(args, lambda a: a.update_consumer_group(args.group, cluster=args.cluster,
                                                               broker_addr=args.broker, **settings))
    return emit(args, {"group": args.group, "brokers": addrs, "changed": settings}, ("GROUP", "BROKER"),
                [(args.group, a) for a in addrs])


# (option, short option as mqadmin updateSubGroup's, setting, value type, help)
GROUP_SETTINGS: tuple[tuple[str, str, str, Callable[[str], Any], str], ...] = (
    ("--consume-enable", "-s", "consume_enable", parse_bool, "may the group consume"),
    ("--consume-from-min", "-m", "consume_from_min_enable", parse_bool,
     "a new group starts from a queue's first message"),
    ("--broadcast", "-d", "consume_broadcast_enable", parse_bool, "may broadcasting consumers join"),
    ("--orderly", "-o", "consume_message_orderly", parse_bool,
     "consumeMessageOrderly: POP and 5.x (gRPC) consumers get each queue in order, one batch at a time"),
    ("--retry-queue-nums", "-q", "retry_queue_nums", bounded(0), "queues of the group's retry topic"),
    ("--retry-max-times", "-r", "retry_max_times", bounded(0), "redeliveries before the DLQ"),
    ("--retry-policy", "-p", "group_retry_policy", parse_retry_policy,
     'the backoff of 5.x consumers, JSON as mqadmin\'s: {"type":"EXPONENTIAL","exponentialRetryPolicy":'
     '{"initial":5000,"max":7200000,"multiplier":2}} or {"type":"CUSTOMIZED","customizedRetryPolicy":'
     '{"next":[1000,5000,10000]}}'),
    ("--broker-id", "-i", "broker_id", bounded(0), "the broker id consumers read from"),
    ("--which-broker-when-consume-slowly", "-w", "which_broker_when_consume_slowly", bounded(0),
     "the broker id consumers read from when they fall behind"),
    ("--notify-consumer-ids-changed", "-a", "notify_consumer_ids_changed_enable", parse_bool,
     "tell members when the group's members change"),
    ("--attributes", "", "attributes", parse_attributes,
     "RocketMQ 5's group attributes to change, mqadmin's +a=b,+c=d,-e (set a and c, remove e): "
     "5.5's lite ones, e.g. +lite.bind.topic=Orders,+lite.sub.client.quota=100 (docs/grpc.md)"),
)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SubscriptionGroupConfig)}
"""RocketMQ's defaults, what a created group gets for the settings not given."""
_DEFAULT_TEXT = {"group_retry_policy": "the broker's delay levels", "attributes": "none"}
_METAVARS: dict[Callable[[str], Any], str] = {parse_bool: "true|false", parse_retry_policy: "JSON",
                                              parse_attributes: "+NAME=VALUE,-NAME"}


def _group_settings(cmd: Any, *, create: bool) -> None:
    cmd.add_argument("-g", "--group", required=True)
    for option, short, dest, kind, help_text in GROUP_SETTINGS:
        default = _DEFAULT_TEXT.get(dest) or str(_DEFAULTS[dest]).lower()
        shown = f"default {default}" if create else "unchanged if not given"
        metavar = _METAVARS.get(kind, "N")
        names = (option, short) if short else (option,)
        cmd.add_argument(*names, dest=dest, type=kind, metavar=metavar, help=f"{help_text} ({shown})")
    where = cmd.add_mutually_exclusive_group()
    where.add_argument("-c", "--cluster")
    where.add_argument("-b", "--broker", metavar="HOST:PORT")


def _chosen(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given on the command line."""
    return {dest: getattr(args, dest) for _, _, dest, _, _ in GROUP_SETTINGS if getattr(args, dest) is not None}


def consumer_delete(args: argparse.Namespace) -> int:
    addrs = with_admin(args, lambda a: a.delete_consumer_group(args.group, cluster=args.cluster))
    return emit(args, {"group": args.group, "brokers": addrs}, ("DELETED", "BROKER"),
                [(args.group, a) for a in addrs])


def consumer_progress(args: argparse.Namespace) -> int:
    progress = with_admin(args, lambda a: a.consumer_progress(args.group, args.topic))  # NoOffsetsError: exit 1
    if args.json:
        return emit(args, progress, (), [])
    print_table(("TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "LAG", "IN FLIGHT", "LAST CONSUMED"),
                [(q.mq.topic, q.mq.broker_name, q.mq.queue_id, q.broker_offset, q.consumer_offset, q.lag, q.in_flight,
                  format_time_ms(q.last_timestamp)) for q in progress.queues])
    print(f"\nConsume TPS: {progress.consume_tps:.2f}\nTotal lag: {progress.total_lag}")
    return 0


def consumer_connections(args: argparse.Namespace) -> int:
    conns = with_admin(args, lambda a: a.consumer_connections(args.group))
    if args.json:
        return emit(args, conns, (), [])
    print_table(("CLIENT ID", "ADDRESS", "LANGUAGE", "VERSION"),
                [(c.client_id, c.client_addr, c.language, c.version_name) for c in conns.connections])
    print()
    print_table(("TOPIC", "SUBSCRIPTION", "TYPE"),
                [(t, s.sub_string, s.expression_type) for t, s in sorted(conns.subscriptions.items())])
    print(f"\nConsume type: {_name(conns.consume_type)}  Message model: {_name(conns.message_model)}  "
          f"Consume from: {_name(conns.consume_from_where)}")
    return 0


def _name(value: Any) -> str:
    return value.name if value is not None else "-"


def consumer_reset_offset(args: argparse.Namespace) -> int:
    offsets = with_admin(args, lambda a: a.reset_offset_by_time(args.group, args.topic, args.timestamp,
                                                                force=not args.no_force))
    if not offsets:
        raise ClientError(f"no queue of {args.topic} was reset")
    rows = sorted(offsets.items(), key=lambda kv: (kv[0].broker_name, kv[0].queue_id))
    value = [{"topic": mq.topic, "broker_name": mq.broker_name, "queue_id": mq.queue_id, "offset": off}
             for mq, off in rows]
    return emit(args, value, ("BROKER", "QUEUE", "NEW OFFSET"), [(mq.broker_name, mq.queue_id, o) for mq, o in rows])
