"""``skiff message query``, and ``skiff send`` / ``skiff consume`` for quick tries.

    skiff message query --id 7F0000010000A1B20000000000001F40
    skiff message query --key order-17 -t Orders
    skiff message query -t Orders -b broker-a -q 3 --offset 120
    skiff send -t Orders --tags created --keys order-17 -p region=eu "hello"
    echo hello | skiff send -t Orders -
    skiff consume -t Orders -g tryout --from-beginning --count 10
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from skiff.cli.admin import (
    bounded,
    client_config,
    command,
    common_args,
    emit,
    family,
    print_json_line,
    print_table,
    run_client,
    with_admin,
)
from skiff.cli.consumer import parse_timestamp_ms
from skiff.cli.topic import format_time_ms
from skiff.cli.trace import register_trace
from skiff.client.admin import QUERY_MAX_NUM, TIME_MAX_MS, AsyncAdmin
from skiff.client.errors import ClientError, ClientTimeoutError, MessageValidationError
from skiff.client.producer import AsyncProducer, SelectByHash
from skiff.client.pull_client import AsyncPullClient
from skiff.client.results import MessageSelector, SendResult
from skiff.common.message import Message, MessageQueue
from skiff.common.names import topic_error
from skiff.common.stored_message import StoredMessage
from skiff.filter import FilterError, build_filter
from skiff.filter.tags import SUB_ALL, TAG_SEPARATOR
from skiff.protocol.errors import ConnectionClosed, RequestTimeout

CLI_PRODUCER_GROUP = "SKIFF_CLI_PRODUCER"
BODY_PREVIEW_CHARS = 60
SUSPEND_MAX_MS = 5_000
"""Longest long-polling wait of `skiff consume`, so it notices its deadline."""
RETRIABLE = (RequestTimeout, ConnectionClosed, ClientTimeoutError)
"""Pull failures `skiff consume` retries until its deadline: the broker did not answer."""
RETRY_PAUSE_S = 0.5


def register(sub: Any) -> None:
    messages = family(sub, "message", "find stored messages")
    cmd = command(messages, "query", "a message by id, by key, or by queue and offset", message_query)
    how = cmd.add_mutually_exclusive_group(required=True)
    how.add_argument("--id", help="offsetMsgId, or UNIQ_KEY (then give -t)")
    how.add_argument("--key", help="a business key (KEYS); give -t")
    how.add_argument("--offset", type=bounded(0), help="a queue offset; give -t, -b and -q")
    cmd.add_argument("-t", "--topic")
    cmd.add_argument("-b", "--broker", metavar="BROKER_NAME", help="broker name of the queue (with --offset)")
    cmd.add_argument("-q", "--queue", type=bounded(0), help="queue id (with --offset)")
    cmd.add_argument("--begin", type=parse_timestamp_ms, default=0, help="with --key: stored at or after")
    cmd.add_argument("--end", type=parse_timestamp_ms, default=TIME_MAX_MS, help="with --key: stored before")
    cmd.add_argument("--max", type=bounded(1), default=QUERY_MAX_NUM, help="with --key: at most this many")
    register_trace(messages)
    _send_parser(sub)
    _consume_parser(sub)


def _send_parser(sub: Any) -> None:
    cmd = common_args(sub.add_parser("send", help="send a message (or N copies)",
                                     description="Send BODY (or stdin with '-') to a topic; print each result."))
    cmd.add_argument("-t", "--topic", required=True)
    cmd.add_argument("body", metavar="BODY|-", help="the body text, or - to read it from stdin")
    cmd.add_argument("--tags")
    cmd.add_argument("--keys", action="append", default=[], help="a business key (repeat for more)")
    cmd.add_argument("-p", "--property", action="append", default=[], metavar="K=V", help="a user property")
    cmd.add_argument("--count", type=bounded(1), default=1, help="send the body this many times")
    cmd.add_argument("--delay-level", type=bounded(0), default=0,
                     help="RocketMQ delay level 1-18 (the broker caps it at its highest)")
    cmd.add_argument("--order-key", help="send every copy to the queue this key hashes to")
    cmd.add_argument("-g", "--group", default=CLI_PRODUCER_GROUP, help="producer group")
    cmd.set_defaults(handler=lambda args, extra: send(args))


def _consume_parser(sub: Any) -> None:
    cmd = common_args(sub.add_parser("consume", help="print messages of a topic",
                                     description="Pull a topic's messages and print them until --count or "
                                                 "--timeout-s; with -g, start from and commit the group's offsets."))
    cmd.add_argument("-t", "--topic", required=True)
    cmd.add_argument("-g", "--group", help="consumer group whose offsets to use and commit")
    which = cmd.add_mutually_exclusive_group()
    which.add_argument("--tags", default="*", help="tag expression, e.g. 'A || B' (default *)")
    which.add_argument("--sql", help="SQL92 expression on properties")
    cmd.add_argument("--from-beginning", action="store_true",
                     help="start at the first message (default: only new ones) when the group has no offset")
    cmd.add_argument("--count", type=bounded(1), help="stop after this many messages (exit 1 if fewer arrive)")
    cmd.add_argument("--timeout-s", type=bounded(0.0, kind=float), default=10.0,
                     help="stop after this long (default 10)")
    cmd.set_defaults(handler=lambda args, extra: consume(args))


# ------------------------------------------------------------------- query

def message_query(args: argparse.Namespace) -> int:
    found = with_admin(args, lambda a: _query(a, args))
    if args.json:
        return emit(args, found, (), [])
    for i, m in enumerate(found):
        if i:
            print()
        print_message_detail(m)
    return 0


async def _query(admin: AsyncAdmin, args: argparse.Namespace) -> list[StoredMessage]:
    if args.id is not None:
        return [await admin.message_by_id(args.id, args.topic)]
    if not args.topic:
        raise MessageValidationError("give the topic (-t) to query by key or offset")
    if args.key is not None:
        found = await admin.messages_by_key(args.topic, args.key, begin_ms=args.begin, end_ms=args.end,
                                            max_num=args.max)
        if not found:
            raise ClientError(f"no message of {args.topic} has the key {args.key!r}")
        return found
    if args.broker is None or args.queue is None:
        raise MessageValidationError("--offset needs the queue: -b BROKER_NAME -q QUEUE_ID")
    msg = await admin.message_at(MessageQueue(args.topic, args.broker, args.queue), args.offset)
    if msg is None:
        raise ClientError(f"no message at offset {args.offset} of {args.topic}@{args.broker}:{args.queue}")
    return [msg]


def print_message_detail(m: StoredMessage) -> None:
    user = {k: v for k, v in m.properties.items() if k not in ("TAGS", "KEYS")}
    print_table(("FIELD", "VALUE"), [
        ("Message ID", m.msg_id), ("Offset message ID", m.offset_msg_id), ("Topic", m.topic),
        ("Tags", m.tags or ""), ("Keys", " ".join(m.keys)), ("Queue ID", m.queue_id),
        ("Queue offset", m.queue_offset), ("CommitLog offset", m.commit_log_offset),
        ("Reconsume times", m.reconsume_times), ("Born", f"{format_time_ms(m.born_timestamp)} from {m.born_host}"),
        ("Stored", f"{format_time_ms(m.store_timestamp)} on {m.store_host}"), ("System flag", m.sys_flag),
        ("Properties", ", ".join(f"{k}={v}" for k, v in user.items())), ("Body bytes", len(m.body)),
        ("Body", preview(m.body, 1000)),
    ])


def preview(body: bytes, chars: int = BODY_PREVIEW_CHARS) -> str:
    text = body.decode("utf-8", "replace").replace("\n", "\\n")
    return text if len(text) <= chars else text[: chars - 1] + "…"


# -------------------------------------------------------------------- send

def send(args: argparse.Namespace) -> int:
    body = sys.stdin.buffer.read() if args.body == "-" else args.body.encode()
    props = dict(_pair(p) for p in args.property)
    msg = Message.of(args.topic, body, tags=args.tags, keys=args.keys or None, properties=props,
                     delay_level=args.delay_level)
    results = run_client(_send(args, msg))
    rows = [(r.send_status.name, r.msg_id, r.offset_msg_id, r.message_queue.broker_name, r.message_queue.queue_id,
             r.queue_offset) for r in results]
    return emit(args, results, ("STATUS", "MSG ID", "OFFSET MSG ID", "BROKER", "QUEUE", "QUEUE OFFSET"), rows)


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise MessageValidationError(f"property {text!r} is not of the form key=value")
    return key, value


async def _send(args: argparse.Namespace, msg: Message) -> list[SendResult]:
    async with AsyncProducer(args.group, client_config=client_config(args)) as producer:
        if args.order_key is None:
            return [await producer.send(msg) for _ in range(args.count)]
        return [await producer.send(msg, selector=SelectByHash(), arg=args.order_key) for _ in range(args.count)]


# ----------------------------------------------------------------- consume

def consume(args: argparse.Namespace) -> int:
    problem = topic_error(args.topic)
    if problem:
        raise MessageValidationError(problem)
    got = run_client(_Consume(args, consume_selector(args.sql, args.tags)).run())
    if args.count is not None and got < args.count:
        print(f"skiff: received {got} of {args.count} messages within {args.timeout_s} s", file=sys.stderr)
        return 1
    return 0


def consume_selector(sql: str | None, tags: str) -> MessageSelector:
    """The subscription of `skiff consume`, parsed here so a typo fails at once (the broker
    would only refuse it at the first pull). Stricter than a broker on tags: an empty tag
    between ``||`` is refused, where RocketMQ silently drops it."""
    selector = MessageSelector.by_sql(sql) if sql else MessageSelector.by_tag(tags)
    try:
        build_filter(selector.expression, selector.expression_type)
    except FilterError as exc:
        raise MessageValidationError(str(exc)) from None
    if not sql and selector.expression != SUB_ALL and any(not t.strip() for t in tags.split(TAG_SEPARATOR)):
        raise MessageValidationError(f"tag expression {tags!r} has an empty tag: write tags joined by '||'")
    return selector


class _Consume:
    """One long-polling pull loop per queue until the count or the deadline; offsets committed at the end."""

    def __init__(self, args: argparse.Namespace, selector: MessageSelector) -> None:
        self.args = args
        self.selector = selector
        self.deadline = time.monotonic() + args.timeout_s
        self.received = 0
        self.done = asyncio.Event()
        self.next_offsets: dict[MessageQueue, int] = {}
        self.resets: dict[MessageQueue, int] = {}
        """Offsets an admin reset the group to (`skiff consumer reset-offset`), for the pull loops."""

    def _reset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        self.resets.update(offsets)
        self.next_offsets.update(offsets)

    async def run(self) -> int:
        config = client_config(self.args)
        group = self.args.group
        # the pulls, the heartbeats and the trace all name the user's group; without one the pulls
        # name PULL_CLIENT_GROUP (brokers require a group) and nothing joins or traces
        async with AsyncAdmin(client_config=config) as admin, \
                AsyncPullClient(client_config=config, **({"group": group, "trace": True} if group else {})) as client:
            queues = await client.fetch_subscribe_queues(self.args.topic)
            if group:
                await client.join(self.args.topic, self.selector, on_reset=self._reset)
            starts = await asyncio.gather(*(self._start(admin, mq) for mq in queues))
            loops = [asyncio.ensure_future(self._pull_loop(client, mq, off)) for mq, off in zip(queues, starts)]
            done = asyncio.ensure_future(self.done.wait())
            # a loop that ends early failed (a refused filter, a missing topic): report it now, not at the deadline
            await asyncio.wait([done, *loops], timeout=max(self.deadline - time.monotonic(), 0),
                               return_when=asyncio.FIRST_COMPLETED)
            done.cancel()
            for loop in loops:
                loop.cancel()
            failures = [r for r in await asyncio.gather(*loops, return_exceptions=True) if isinstance(r, Exception)]
            if self.args.group:
                await asyncio.gather(*(admin.update_consumer_offset(self.args.group, mq, off)
                                       for mq, off in self.next_offsets.items()))
            if failures and (self.args.count is None or self.received < self.args.count):
                raise failures[0]
        return self.received

    async def _start(self, admin: AsyncAdmin, mq: MessageQueue) -> int:
        if self.args.group:
            committed = await admin.fetch_consumer_offset(self.args.group, mq)
            if committed is not None and committed >= 0:
                return committed
        return await admin.min_offset(mq) if self.args.from_beginning else await admin.max_offset(mq)

    async def _pull_loop(self, client: AsyncPullClient, mq: MessageQueue, offset: int) -> None:
        while not self.done.is_set():
            remaining_ms = int((self.deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return
            try:
                result = await client.pull_blocking(
                    mq, offset, 32, sub_expression=self.selector.expression,
                    expression_type=self.selector.expression_type,
                    suspend_timeout_ms=min(remaining_ms, SUSPEND_MAX_MS))
            except RETRIABLE as exc:  # a slow or restarting broker: the deadline decides, not one pull
                print(f"skiff: pulling {mq.topic}:{mq.queue_id} from {mq.broker_name} failed ({exc}); retrying",
                      file=sys.stderr)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            reset = self.resets.pop(mq, None)
            if reset is not None:  # what this pull read is before or after where the group now is
                offset = reset
                continue
            printed = []
            for m in result.messages:
                if self.done.is_set():
                    break
                self._print(m)
                printed.append(m)
                self.next_offsets[mq] = m.queue_offset + 1
            client.consumed(printed)
            if self.done.is_set():
                return
            self.next_offsets[mq] = result.next_begin_offset
            offset = result.next_begin_offset

    def _print(self, m: StoredMessage) -> None:
        self.received += 1
        if self.args.json:
            print_json_line(m)
        else:
            print(f"{m.queue_id}:{m.queue_offset} {m.msg_id} tags={m.tags or ''} keys={' '.join(m.keys)} "
                  f"{preview(m.body)}", flush=True)
        if self.args.count is not None and self.received >= self.args.count:
            self.done.set()
