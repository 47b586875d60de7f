"""Filtered pulls over a backlog: ``skiff bench filter_pull`` or ``python -m skiff.bench.filter_pull``.

Starts one ``skiff broker`` (ASYNC_FLUSH, ``enablePropertyFilter=true``, a
temporary store, no NameServer) unless ``--addr`` names a running one, fills
a topic of 8 queues with ``--messages`` messages (``--body-bytes`` bodies, six
properties each: UNIQ_KEY, WAIT, TAGS, KEYS, ``a`` from 0 to 99 and a
``region``), then reads the whole backlog once per case, as a consumer does:
one pull chain per queue (32 messages a pull, the next one from the answer's
``nextBeginOffset``), the queues in parallel. Cases:

- ``none``: subscription ``*``, every message crosses the wire;
- ``tag``: ``TagA || TagC`` (half the messages), tested on ConsumeQueue tag codes;
- ``sql``: ``a > 90 AND region IN ('eu', 'us')`` (about 3 %), evaluated on the
  stored properties of every entry, so only matches cross the wire.

For each: backlog entries read per second, messages delivered (and per
second), bytes on the wire, pulls, and the broker's CPU per backlog entry.
``--quick`` is a short smoke run; ``--json`` prints the figures as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from skiff.bench.broker_load import QUEUES, TIMEOUT_MS, TOPIC, Broker, create_topic
from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.common.sysflag import PullSysFlag
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.protocol.message_codec import encode_batch
from skiff.testing.processes import SkiffProcess, broker_args
from skiff.testing.wire import send_header
from skiff.transport import RemotingClient
from skiff.transport.loop import run_coroutine

PULL_BATCH = 32
FILL_BATCH = 256
SELECTIVE_SQL = "a > 90 AND region IN ('eu', 'us')"
CASES: dict[str, tuple[str, str]] = {
    "none": ("*", "TAG"),
    "tag": ("TagA || TagC", "TAG"),
    "sql": (SELECTIVE_SQL, "SQL92"),
}
"""Case name -> (subscription, expression type)."""
_PULL_FLAG = int(PullSysFlag.SUBSCRIPTION)


@dataclass(frozen=True, slots=True)
class CaseFigures:
    case: str
    subscription: str
    backlog: int
    """ConsumeQueue entries read (the whole backlog)."""
    delivered: int
    pulls: int
    wire_bytes: int
    seconds: float
    broker_cpu_s: float

    @property
    def backlog_per_s(self) -> float:
        return self.backlog / self.seconds

    @property
    def delivered_per_s(self) -> float:
        return self.delivered / self.seconds

    @property
    def broker_cpu_us_per_entry(self) -> float:
        return self.broker_cpu_s / self.backlog * 1e6 if self.backlog else 0.0


def make_messages(count: int, body_bytes: int, seed: int = 11) -> list[Message]:
    """Messages as `skiff.bench.filter` makes them, so the selectivities match."""
    rng = random.Random(seed)
    body = b"x" * body_bytes
    return [
        Message.of(TOPIC, body, tags=rng.choice(("TagA", "TagB", "TagC", "TagD")), keys=f"order-{i}",
                   properties={"a": str(rng.randrange(100)),
                               "region": rng.choice(("eu", "us", "ap", "sa", "af", "me"))})
        for i in range(count)
    ]


def matches(case: str, msg: Message) -> bool:
    """The case's expression evaluated here, to check what the broker delivered."""
    props = msg.properties
    if case == "tag":
        return props["TAGS"] in ("TagA", "TagC")
    if case == "sql":
        return int(props["a"]) > 90 and props["region"] in ("eu", "us")
    return True


async def fill(addr: str, msgs: Sequence[Message]) -> None:
    """Send ``msgs`` as batches, round-robin over the queues, a few requests in flight."""
    client = RemotingClient()
    try:
        conn = await client.connection(addr)
        batches = [msgs[i:i + FILL_BATCH] for i in range(0, len(msgs), FILL_BATCH)]
        for start in range(0, len(batches), 8):
            requests = []
            for i, batch in enumerate(batches[start:start + 8], start):
                header = send_header(RequestCode.SEND_BATCH_MESSAGE, TOPIC, i % QUEUES, "", batch=True)
                cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header,
                                              encode_batch(batch, UNIQ_IDS.next_id))
                requests.append(conn.request(cmd, TIMEOUT_MS))
            for resp in await asyncio.gather(*requests):
                if resp.code != ResponseCode.SUCCESS:
                    raise RuntimeError(f"filling the backlog failed: {resp.code} {resp.remark}")
    finally:
        await client.close()


async def read_backlog(broker: Broker, case: str, ends: Sequence[int]) -> CaseFigures:
    """Pull every queue from 0 to ``ends[q]`` with the case's subscription, queues in parallel."""
    subscription, kind = CASES[case]
    client = RemotingClient()
    totals = {"delivered": 0, "pulls": 0, "bytes": 0}

    async def chain(queue_id: int) -> None:
        conn = await client.connection(broker.addr)
        offset = 0
        while offset < ends[queue_id]:
            header = PullMessageRequestHeader(f"bench-{case}", TOPIC, queue_id, offset, PULL_BATCH, _PULL_FLAG,
                                              0, 0, 0, subscription, kind)
            resp = await conn.request(RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext()),
                                      TIMEOUT_MS)
            if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
                raise RuntimeError(f"pull {case} of queue {queue_id} at {offset}: {resp.code} {resp.remark}")
            totals["pulls"] += 1
            totals["bytes"] += len(resp.body)
            totals["delivered"] += _records(resp.body)
            offset = int(resp.ext("nextBeginOffset") or 0)

    try:
        cpu0, t0 = broker.cpu_s()[0], time.monotonic()
        await asyncio.gather(*(chain(q) for q in range(QUEUES)))
        seconds, cpu = time.monotonic() - t0, broker.cpu_s()[0] - cpu0
    finally:
        await client.close()
    return CaseFigures(case, subscription, sum(ends), totals["delivered"], totals["pulls"], totals["bytes"],
                       seconds, cpu)


def _records(body: bytes | bytearray | memoryview) -> int:
    """How many stored records a pull body holds (each starts with its total size)."""
    view, count, pos = memoryview(body), 0, 0
    while pos < len(view):
        pos += int.from_bytes(view[pos:pos + 4], "big")
        count += 1
    return count


async def _queue_ends(addr: str) -> list[int]:
    client = RemotingClient()
    try:
        return [int((await client.invoke(addr, RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}), TIMEOUT_MS)).ext("offset") or 0)
            for q in range(QUEUES)]
    finally:
        await client.close()


async def measure(broker: Broker, msgs: Sequence[Message], cases: Sequence[str], rounds: int,
                  progress: Callable[[str], None]) -> list[CaseFigures]:
    """Fill the backlog, then read it with each case ``rounds`` times; the fastest round counts."""
    await create_topic(broker)
    progress(f"filling {len(msgs):,} messages")
    await fill(broker.addr, msgs)
    ends = await _queue_ends(broker.addr)
    expected = {case: sum(1 for m in msgs if matches(case, m)) for case in cases}
    out = []
    for case in cases:
        progress(f"case {case}")
        runs = [await read_backlog(broker, case, ends) for _ in range(rounds)]
        best = min(runs, key=lambda r: r.seconds)
        if best.delivered != expected[case]:
            raise RuntimeError(f"case {case}: the broker delivered {best.delivered} messages, "
                               f"{expected[case]} match")
        out.append(best)
    return out


def report(figures: Sequence[CaseFigures], messages: int, body_bytes: int) -> str:
    lines = [f"skiff bench filter_pull: {messages:,} messages of {body_bytes} B over {QUEUES} queues"]
    for f in figures:
        lines.append(
            f"  {f.case:5} {f.backlog_per_s:>10,.0f} backlog/s  delivered {f.delivered:>8,} "
            f"({f.delivered_per_s:>9,.0f}/s)  {f.wire_bytes / 1e6:8.1f} MB on the wire  {f.pulls:>6,} pulls  "
            f"broker CPU {f.broker_cpu_us_per_entry:.2f} us/entry   [{f.subscription}]")
    return "\n".join(lines)


def _start_broker(directory: str) -> SkiffProcess:
    args = broker_args(directory, "", "--flushDiskType=ASYNC_FLUSH", "--enablePropertyFilter=true", sizes=())
    return SkiffProcess(args).wait_listening()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench filter_pull", description=__doc__.split("\n\n")[0])
    parser.add_argument("--addr", help="a running broker's host:port with enablePropertyFilter=true "
                                       "(default: start one)")
    parser.add_argument("--messages", type=int, default=200_000, help="backlog size (default 200,000)")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="reads of the backlog per case; the best counts")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {','.join(CASES)}")
    parser.add_argument("--quick", action="store_true", help="a 4,000-message smoke run, one round")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not cases or set(cases) - set(CASES):
        parser.error(f"--cases: choose from {', '.join(CASES)}")
    count, rounds = (4_000, 1) if args.quick else (args.messages, args.rounds)
    if count < 1 or rounds < 1 or args.body_bytes < 1:
        parser.error("--messages, --rounds and --body-bytes must be positive")
    msgs = make_messages(count, args.body_bytes)
    progress: Callable[[str], None] = (lambda _: None) if args.json else (lambda s: print(f"... {s}", flush=True))
    figures = _run(args.addr, msgs, cases, rounds, progress)
    if args.json:
        print(json.dumps({"messages": count, "body_bytes": args.body_bytes,
                          "cases": [{**asdict(f), "backlog_per_s": round(f.backlog_per_s),
                                     "delivered_per_s": round(f.delivered_per_s),
                                     "broker_cpu_us_per_entry": round(f.broker_cpu_us_per_entry, 2)}
                                    for f in figures]}, indent=2))
    else:
        print(report(figures, count, args.body_bytes))
    return 0


def _run(addr: str | None, msgs: Sequence[Message], cases: Sequence[str], rounds: int,
         progress: Callable[[str], None]) -> list[CaseFigures]:
    if addr:
        return run_coroutine(measure(Broker(addr, None), msgs, cases, rounds, progress))
    directory = tempfile.mkdtemp(prefix="skiff-bench-filter-")
    proc = _start_broker(directory)
    try:
        return run_coroutine(measure(Broker(proc.addr, proc.pid), msgs, cases, rounds, progress))
    finally:
        proc.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
