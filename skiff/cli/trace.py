"""``skiff message trace MSG_ID|KEY [-t TRACE_TOPIC]``: a message's traced timeline.

    skiff message trace 7F0000016B54CF2DCC5D6B293F41B556
    skiff message trace order-17 --json

A table per message (a key may name several), headed by its msg id, topic, tags
and keys; in it one row per event, oldest first: the send (producer group,
client, cost, status, broker, queue and offset, store address, offset msg id)
and each consumption (consumer group, client, start, cost, status, reconsume
times). ``--json`` prints the events as one list, each with its ``msg_id``.
Exits 1 when nothing was traced for the id or key.
"""

from __future__ import annotations

import argparse
from typing import Any

from skiff.cli.admin import command, emit, print_table, with_admin
from skiff.cli.topic import format_time_ms
from skiff.client.errors import ClientError
from skiff.client.trace import TRACE_TOPIC, TraceEvent, query_trace

HEADERS = ("TIME", "EVENT", "GROUP", "CLIENT", "COST MS", "STATUS", "DETAILS")


def register_trace(messages: Any) -> None:
    """Add ``trace`` to the ``skiff message`` family."""
    cmd = command(messages, "trace", "a message's traced timeline: its send and every consumption", message_trace)
    cmd.add_argument("key", metavar="MSG_ID|KEY", help="msg id (UNIQ_KEY), offset msg id, or a key of the message")
    cmd.add_argument("-t", "--trace-topic", default=TRACE_TOPIC, help=f"where clients trace (default {TRACE_TOPIC})")


def message_trace(args: argparse.Namespace) -> int:
    events: list[TraceEvent] = with_admin(args, lambda a: query_trace(a, args.key, trace_topic=args.trace_topic))
    if not events:
        raise ClientError(f"nothing in {args.trace_topic} traces {args.key!r} (is the message's client tracing, "
                          f"and to that topic?)")
    if args.json:
        return emit(args, events, (), [])
    for i, (msg_id, own) in enumerate(by_message(events).items()):
        if i:
            print()
        print(_about(msg_id, own))
        print_table(HEADERS, [_row(e) for e in own])
    return 0


def by_message(events: list[TraceEvent]) -> dict[str, list[TraceEvent]]:
    """Each message's events (a key may name several messages), in the order of each one's
    first event; the events stay in time order within a message."""
    grouped: dict[str, list[TraceEvent]] = {}
    for e in events:
        grouped.setdefault(e.msg_id, []).append(e)
    return grouped


def _about(msg_id: str, events: list[TraceEvent]) -> str:
    """The heading of one message's table: its id, then what its send says (topic, tags, keys)."""
    send = next((e for e in events if e.kind == "send"), None)
    if send is not None:
        return f"{msg_id}: topic {send.topic}, tags {send.tags or '-'}, keys {send.keys or '-'}"
    topic = next((e.topic for e in events if e.topic), "")
    return f"{msg_id}: " + (f"topic {topic}, " if topic else "") + "send not traced"


def _row(e: TraceEvent) -> tuple[object, ...]:
    return (format_time_ms(e.time_ms), e.kind, e.group, e.client_host, e.cost_ms, e.status, _details(e))


def _details(e: TraceEvent) -> str:
    if e.kind == "send":
        return (f"{e.broker_name} queue {e.queue_id} offset {e.queue_offset}, stored on {e.store_host or '?'}, "
                f"offset msg id {e.offset_msg_id}")
    if e.kind == "consume":
        return f"reconsume times {e.reconsume_times}" + (f", {e.consume_result}" if e.consume_result else "")
    return f"topic {e.topic}"
