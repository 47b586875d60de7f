"""Broker benchmark: ``skiff bench broker`` or ``python -m skiff.bench.broker_load``.

Starts one ``skiff broker`` (ASYNC_FLUSH, listening on loopback, a temporary
store, no NameServer) unless ``--addr`` names a running one, and drives it over
the wire with 1 KiB messages (``--size``) from this process:

- produce, batched: SEND_BATCH_MESSAGE of ``--batch`` messages, ``--inflight``
  requests pipelined on each of ``--connections`` connections, over 8 queues;
- produce, single: SEND_MESSAGE_V2 of one message each, pipelined the same way
  (what the C++ client sends);
- consume: PULL_MESSAGE of 32 messages (RocketMQ's pull batch), pipelined,
  over everything produced;
- latency: batched sends, then single sends, paced (open loop) at half the rate
  the produce phases reached; each request's latency counts from when it was due,
  so a stall is not hidden by the requests that wait behind it.

Request bodies are encoded once and re-sent, so the load generator spends its
time on the wire, not on encoding. The broker's CPU time per message comes from
its process's CPU counters, with the kernel's (system) part beside it. ``--profile FILE`` runs the broker under pyinstrument
and writes its profile there. ``--metrics`` starts the broker with a ``metricsPort``
(and times one scrape at the end); ``--acl`` starts it with ``aclEnable=true`` and an
account whose topic and group permissions are checked, and signs every request
(the load generator signs each distinct request once; the broker checks each one). ``--quick`` is a short smoke run; ``--json`` prints
the figures as one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import psutil

from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.common.names import TBW102
from skiff.common.sysflag import PullSysFlag
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.protocol.message_codec import encode_batch, send_properties
from skiff.testing.processes import SkiffProcess, broker_args, free_port
from skiff.testing.wire import send_header
from skiff.transport import Connection, RemotingClient
from skiff.transport.loop import run_coroutine

TOPIC = "BenchTopic"
QUEUES = 8
PULL_BATCH = 32
TIMEOUT_MS = 30_000
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)


@dataclass(frozen=True, slots=True)
class Plan:
    seconds: float
    connections: int
    batch: int
    inflight: int
    body_bytes: int


FULL = Plan(seconds=5.0, connections=4, batch=64, inflight=8, body_bytes=1024)
QUICK = Plan(seconds=0.5, connections=2, batch=16, inflight=4, body_bytes=1024)


@dataclass(frozen=True, slots=True)
class Rate:
    messages: int
    seconds: float
    broker_cpu_s: float
    broker_system_s: float = 0.0
    """The kernel's part of ``broker_cpu_s`` (socket I/O, page faults and zeroing of fresh file pages)."""

    @property
    def per_s(self) -> float:
        return self.messages / self.seconds

    def mb_per_s(self, body_bytes: int) -> float:
        return self.messages * body_bytes / self.seconds / 1e6

    @property
    def broker_cpu_us_per_message(self) -> float:
        return self.broker_cpu_s / self.messages * 1e6 if self.messages else 0.0


@dataclass(frozen=True, slots=True)
class Latency:
    target_per_s: float
    requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    failed: int = 0
    """Requests answered other than SUCCESS (SYNC_MASTER's FLUSH_SLAVE_TIMEOUT, ...): not in the latencies."""


BENCH_ACL = """accounts:
  - accessKey: bench-user
    secretKey: bench-secret-1
    admin: true
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [BenchTopic=PUB|SUB]
"""
"""An admin (it creates the topic) with topic perms listed, so every send and pull is still
checked against them (RocketMQ skips the checks only for an admin with none)."""
BENCH_KEYS = ("bench-user", "bench-secret-1")


class Broker:
    """The broker under test: its address, its CPU counters, and the keys requests are signed with."""

    def __init__(self, addr: str, pid: int | None, keys: tuple[str, str] | None = None) -> None:
        self.addr = addr
        self._proc = psutil.Process(pid) if pid else None
        self.keys = keys

    def sign(self, cmd: RemotingCommand) -> RemotingCommand:
        if self.keys is not None:
            sign_command(cmd, *self.keys)
        return cmd

    def cpu_s(self) -> tuple[float, float]:
        """The broker's (user + system, system) CPU seconds so far."""
        if self._proc is None:
            return 0.0, 0.0
        t = self._proc.cpu_times()
        return t.user + t.system, t.system


def _rate_since(messages: int, t0: float, cpu0: tuple[float, float], broker: Broker) -> Rate:
    total, system = broker.cpu_s()
    return Rate(messages, time.monotonic() - t0, total - cpu0[0], system - cpu0[1])


async def _connections(addr: str, count: int) -> tuple[list[RemotingClient], list[Connection]]:
    clients = [RemotingClient() for _ in range(count)]
    return clients, [await c.connection(addr) for c in clients]


async def _pipelined(conn: Connection, make: Callable[[int], RemotingCommand | None], inflight: int,
                     count: Callable[[RemotingCommand, RemotingCommand], int]) -> int:
    """Keep ``inflight`` requests of ``make(i)`` in flight until it returns None; return the sum
    of ``count(request, response)``."""
    pending: collections.deque[tuple[RemotingCommand, asyncio.Future[RemotingCommand]]] = collections.deque()
    total, i = 0, 0
    try:
        while True:
            while len(pending) < inflight:
                cmd = make(i)
                if cmd is None:
                    break
                i += 1
                pending.append((cmd, conn.request(cmd, TIMEOUT_MS)))
            if not pending:
                return total
            cmd, future = pending.popleft()
            total += count(cmd, await future)
    finally:
        for _, future in pending:
            future.cancel()


def _check(resp: RemotingCommand, *ok: int) -> None:
    if resp.code not in (ok or (ResponseCode.SUCCESS,)):
        raise RuntimeError(f"the broker answered {resp.code}: {resp.remark}")


def _send_requests(plan: Plan, batched: bool, broker: Broker) -> list[RemotingCommand]:
    """One pre-encoded send per queue (bodies are re-sent as they are)."""
    code = RequestCode.SEND_BATCH_MESSAGE if batched else RequestCode.SEND_MESSAGE_V2
    out = []
    for q in range(QUEUES):
        messages = [Message.of(TOPIC, b"x" * plan.body_bytes, tags="bench", keys=f"k{q}-{i}")
                    for i in range(plan.batch if batched else 1)]
        if batched:
            body, props = encode_batch(messages, UNIQ_IDS.next_id), ""
        else:
            body, props = messages[0].body, send_properties(messages[0], UNIQ_IDS.next_id())
        out.append(broker.sign(RemotingCommand(code=code, ext_fields=send_header(code, TOPIC, q, props, batch=batched),
                                               body=body)))
    return out


def _fresh(template: RemotingCommand) -> RemotingCommand:
    return RemotingCommand(code=template.code, ext_fields=template.ext_fields, body=template.body)


async def produce(broker: Broker, plan: Plan, batched: bool) -> Rate:
    templates = _send_requests(plan, batched, broker)
    per_request = plan.batch if batched else 1
    clients, conns = await _connections(broker.addr, plan.connections)
    stop_at = time.monotonic() + plan.seconds

    def make(i: int) -> RemotingCommand | None:
        return None if time.monotonic() >= stop_at else _fresh(templates[i % QUEUES])

    def count(_: RemotingCommand, resp: RemotingCommand) -> int:
        _check(resp)
        return per_request
    try:
        cpu0, t0 = broker.cpu_s(), time.monotonic()
        sent = await asyncio.gather(*(_pipelined(c, make, plan.inflight, count) for c in conns))
        return _rate_since(sum(sent), t0, cpu0, broker)
    finally:
        for client in clients:
            await client.close()


async def consume(broker: Broker, plan: Plan) -> Rate:
    """Pull every queue from offset 0 to its end, pipelined; counts the entries answered."""
    clients, conns = await _connections(broker.addr, plan.connections)
    try:
        ends = [int((await conns[0].request(broker.sign(RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q})), TIMEOUT_MS)).ext("offset") or 0)
            for q in range(QUEUES)]
        pulls = [(q, off) for q in range(QUEUES) for off in range(0, ends[q], PULL_BATCH)]
        shares = [pulls[i::len(conns)] for i in range(len(conns))]

        def maker(share: list[tuple[int, int]]) -> Callable[[int], RemotingCommand | None]:
            def make(i: int) -> RemotingCommand | None:
                if i >= len(share):
                    return None
                q, off = share[i]
                header = PullMessageRequestHeader("BenchGroup", TOPIC, q, off, PULL_BATCH, _SUBSCRIPTION, 0, 0, 0, "*")
                return broker.sign(RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=header.to_ext()))
            return make

        def count(req: RemotingCommand, resp: RemotingCommand) -> int:
            _check(resp)
            return int(resp.ext("nextBeginOffset") or 0) - int((req.ext_fields or {})["queueOffset"])
        cpu0, t0 = broker.cpu_s(), time.monotonic()
        got = await asyncio.gather(*(_pipelined(c, maker(s), plan.inflight, count) for c, s in zip(conns, shares)))
        rate = _rate_since(sum(got), t0, cpu0, broker)
        if rate.messages != sum(ends):
            raise RuntimeError(f"pulled {rate.messages} messages of the {sum(ends)} stored")
        return rate
    finally:
        for client in clients:
            await client.close()


async def latency(broker: Broker, plan: Plan, batched: bool, messages_per_s: float,
                  connections: int = 1) -> Latency:
    """Requests sent on a fixed schedule (open loop), in turn over ``connections``
    connections (producers); latency from the due time. Only SUCCESS answers are counted."""
    templates = _send_requests(plan, batched, broker)
    per_request = plan.batch if batched else 1
    rate = messages_per_s / per_request
    clients, conns = await _connections(broker.addr, connections)
    loop = asyncio.get_running_loop()
    samples: list[float] = []
    failed = 0

    def done(due: float, future: asyncio.Future[RemotingCommand]) -> None:
        nonlocal failed
        if future.result().code != ResponseCode.SUCCESS:
            failed += 1
            return
        samples.append(loop.time() - due)
    try:
        start = loop.time() + 0.05
        total = max(1, int(rate * plan.seconds))
        futures = []
        for i in range(total):
            due = start + i / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            future = conns[i % connections].request(_fresh(templates[i % QUEUES]), TIMEOUT_MS)
            future.add_done_callback(functools.partial(done, due))
            futures.append(future)
        await asyncio.gather(*futures)
    finally:
        for client in clients:
            await client.close()
    if not samples:
        return Latency(rate * per_request, 0, float("nan"), float("nan"), float("nan"), failed)
    samples.sort()
    return Latency(rate * per_request, len(samples), _pct(samples, 50), _pct(samples, 99), samples[-1] * 1000, failed)


def _pct(sorted_s: list[float], pct: float) -> float:
    return sorted_s[min(len(sorted_s) - 1, int(len(sorted_s) * pct / 100))] * 1000


async def create_topic(broker: Broker) -> None:
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader(TOPIC, TBW102, QUEUES, QUEUES, 6, "SINGLE_TAG")
        cmd = broker.sign(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext()))
        _check(await client.invoke(broker.addr, cmd, TIMEOUT_MS))
    finally:
        await client.close()


PHASES = ("produce_batched", "produce_single", "consume", "latency_batched", "latency_single")


async def measure(broker: Broker, plan: Plan, progress: Callable[[str], None],
                  phases: Sequence[str] = PHASES) -> dict[str, object]:
    """Run ``phases`` in order (a latency phase paces at half its produce phase's rate)."""
    await create_topic(broker)
    figures: dict[str, object] = {"plan": asdict(plan)}
    rates: dict[bool, Rate] = {}
    for phase in phases:
        progress(phase)
        batched = phase.endswith("_batched")
        if phase.startswith("produce"):
            rates[batched] = await produce(broker, plan, batched)
            figures[phase] = _rate(rates[batched], plan)
        elif phase == "consume":
            figures[phase] = _rate(await consume(broker, plan), plan)
        else:
            if batched not in rates:
                rates[batched] = await produce(broker, plan, batched)
            figures[phase] = asdict(await latency(broker, plan, batched, rates[batched].per_s / 2))
    return figures


def _rate(rate: Rate, plan: Plan) -> dict[str, float]:
    return {"messages": rate.messages, "seconds": round(rate.seconds, 3), "messages_per_s": round(rate.per_s),
            "mb_per_s": round(rate.mb_per_s(plan.body_bytes), 1),
            "broker_cpu_us_per_message": round(rate.broker_cpu_us_per_message, 2),
            "broker_system_us_per_message": round(rate.broker_system_s / rate.messages * 1e6 if rate.messages else 0.0, 2)}


def report(figures: dict[str, object]) -> str:
    lines = [f"skiff bench broker: {json.dumps(figures['plan'])}"]
    for name in ("produce_batched", "produce_single", "consume"):
        r = figures.get(name)
        if not isinstance(r, dict):
            continue
        lines.append(f"  {name:16} {r['messages_per_s']:>10,} msg/s {r['mb_per_s']:>8} MB/s   broker CPU "
                     f"{r['broker_cpu_us_per_message']} us/msg (system {r['broker_system_us_per_message']})   "
                     f"({r['messages']:,} in {r['seconds']} s)")
    for name in ("latency_batched", "latency_single"):
        lat = figures.get(name)
        if not isinstance(lat, dict):
            continue
        lines.append(f"  {name:16} at {lat['target_per_s']:,.0f} msg/s: p50 {lat['p50_ms']:.2f} ms  "
                     f"p99 {lat['p99_ms']:.2f} ms  max {lat['max_ms']:.2f} ms  ({lat['requests']:,} requests)")
    return "\n".join(lines)


def _start_broker(directory: str, profile: str | None, extra: Sequence[str] = ()) -> SkiffProcess:
    args = broker_args(directory, "", "--flushDiskType=ASYNC_FLUSH", *extra, sizes=())
    if profile:
        prefix = [sys.executable, "-m", "pyinstrument", "-o", profile, "-m", "skiff"]
        proc = SkiffProcess(args, command_prefix=prefix)
    else:
        proc = SkiffProcess(args)
    return proc.wait_listening()


def _phases(parser: argparse.ArgumentParser, text: str) -> list[str]:
    phases = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        parser.error(f"unknown phases {', '.join(unknown)}: choose from {', '.join(PHASES)}")
    return phases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench broker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", help="a running broker's host:port (default: start one)")
    parser.add_argument("--dir", help="where the started broker stores (default: a temporary directory)")
    parser.add_argument("--seconds", type=float, help="length of each phase")
    parser.add_argument("--connections", type=int)
    parser.add_argument("--batch", type=int, help="messages per batched send")
    parser.add_argument("--inflight", type=int, help="requests in flight per connection")
    parser.add_argument("--size", type=int, dest="body_bytes", help="message body bytes (default 1024)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated phases to run (default: all of {','.join(PHASES)})")
    parser.add_argument("--profile", metavar="FILE", help="run the broker under pyinstrument, profile to FILE")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--metrics", action="store_true", help="start the broker with Prometheus metrics on")
    parser.add_argument("--acl", action="store_true", help="start the broker with plain ACL on and sign requests")
    parser.add_argument("--broker-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf key for the started broker (repeatable), e.g. flushIntervalCommitLog=200")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    overrides = {k: getattr(args, k) for k in ("seconds", "connections", "batch", "inflight", "body_bytes")
                 if getattr(args, k)}
    plan = Plan(**{**asdict(plan), **overrides})
    progress = (lambda _: None) if args.json else (lambda what: print(f"... {what}", file=sys.stderr))
    directory = None if args.addr else tempfile.mkdtemp(prefix="skiff-bench-broker-", dir=args.dir)
    extra, metrics_port = _feature_args(args, directory)
    proc = None if args.addr else _start_broker(directory, args.profile, extra)  # type: ignore[arg-type]
    try:
        broker = Broker(args.addr or proc.addr, None if proc is None else proc.pid,  # type: ignore[union-attr]
                        BENCH_KEYS if args.acl else None)
        figures = run_coroutine(measure(broker, plan, progress, _phases(parser, args.phases)))
        figures.update(metrics=bool(metrics_port), acl=args.acl)
        if metrics_port:
            figures["scrape"] = _time_scrape(metrics_port)
    finally:
        if proc is not None:
            proc.stop(timeout_s=120)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    figures["quick"] = args.quick
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    return 0


def _feature_args(args: argparse.Namespace, directory: str | None) -> tuple[list[str], int]:
    """Broker arguments for ``--metrics`` and ``--acl`` (the ACL file goes in the store directory)."""
    extra = [f"--{option}" for option in args.broker_option]
    port = free_port() if args.metrics and not args.addr else 0
    if port:
        extra.append(f"--metricsPort={port}")
    if args.acl and directory is not None:
        path = os.path.join(directory, "plain_acl.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(BENCH_ACL)
        extra += ["--aclEnable=true", f"--plainAclFile={path}"]
    return extra, port


def _time_scrape(port: int) -> dict[str, float]:
    """One scrape of the broker's /metrics: how long it took and how big it was."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        size = len(resp.read())
    return {"ms": round((time.monotonic() - started) * 1000, 2), "bytes": size}


if __name__ == "__main__":
    raise SystemExit(main())
