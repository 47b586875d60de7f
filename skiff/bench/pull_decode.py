"""Our consumer's CPU per consumed message in a pull answer's decoding, in process:
``skiff bench pull_decode [--batch 256] [--size 100]``.

A pull answer's body is a run of stored records; every consumer (push, lite pull, the pull
client) turns it into its messages with `decode_stored_messages`, with the queue's bounds
as extra properties, and then reads each message's body. That is the consumer's only work
per message that grows with the message count (the rest is per pull), so it is measured
alone: ``--pulls`` answers of ``--batch`` records of ``--size`` bytes, laid down by the
store's own record packer as our producer's batches are stored (one born host, one born
millisecond per batch, a UNIQ_KEY each), decoded and their bodies read, ``--repeat``
rounds. No broker, no socket, no loop: little dependence on the machine's load.

    python -m skiff.bench.pull_decode --batch 256
    valgrind --tool=callgrind --toggle-collect=functools_reduce \
        python -m skiff.bench.pull_decode --pulls 50 --repeat 1

It prints process-CPU ns per message, the fastest of the rounds, and fails unless every
answer gave its ``--batch`` messages with their queue offsets and bodies. Under callgrind
with the option above only the measured rounds are counted (they run inside C's
``functools_reduce``): divide the instructions by ``--pulls`` × ``--batch``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from skiff.common.properties import Prop
from skiff.common.record import pack_host, pack_records, record_size
from skiff.protocol.message_codec import decode_stored_messages

TOPIC = b"BenchPullDecode"
BORN_MS = 1_700_000_000_000
UNIQ_KEY_TEXT = "7F00000100002A9F0000000000000000"
"""A UNIQ_KEY as long as our producer's (the properties every message of ours carries)."""


def answers(pulls: int, batch: int, size: int) -> list[bytes]:
    """``pulls`` pull answer bodies of ``batch`` records each, at consecutive queue offsets."""
    props = f"{Prop.UNIQ_KEY}\x01{UNIQ_KEY_TEXT}\x02{Prop.WAIT}\x01true".encode()
    sizes = [record_size(size, len(TOPIC), len(props)) for _ in range(batch)]
    starts = list(itertools.accumulate(sizes[:-1], initial=0))
    out = []
    for pull in range(pulls):
        rows = [(TOPIC.decode(), 0, (pull * batch + i).to_bytes(8, "big") * (size // 8) + bytes(size % 8), props,
                 0, 0, BORN_MS + pull, pack_host("127.0.0.1", 40_000), 0, 0) for i in range(batch)]
        body = pack_records(rows, TOPIC, range(pull * batch, (pull + 1) * batch),
                            [pull * sum(sizes) + s for s in starts], sizes, BORN_MS + pull + 1,
                            pack_host("127.0.0.1", 10911))
        assert body is not None
        out.append(body)
    return out


def consume(bodies: Sequence[bytes], bounds: dict[str, str]) -> int:
    """Decode every answer and read its messages' bodies; the messages decoded."""
    got = 0
    for body in bodies:
        msgs = decode_stored_messages(body, extra_properties=bounds)
        for msg in msgs:
            msg.body  # noqa: B018 - reading it is the consumer's part being measured
        got += len(msgs)
    return got


def check(bodies: Sequence[bytes], batch: int, size: int) -> None:
    """Every answer decodes to its ``batch`` messages: offsets in order, bodies as packed."""
    for pull, body in enumerate(bodies):
        msgs = decode_stored_messages(body)
        assert [m.queue_offset for m in msgs] == list(range(pull * batch, (pull + 1) * batch)), pull
        assert all(len(m.body) == size and m.body[:8] == m.queue_offset.to_bytes(8, "big") for m in msgs)


def run(args: argparse.Namespace) -> dict[str, Any]:
    bodies = answers(args.pulls, args.batch, args.size)
    check(bodies, args.batch, args.size)
    bounds = {Prop.MIN_OFFSET: "0", Prop.MAX_OFFSET: str(args.pulls * args.batch)}
    rounds: list[float] = []

    def measured_round(_: object, __: object) -> None:
        started = time.process_time()
        got = consume(bodies, bounds)
        rounds.append(time.process_time() - started)
        assert got == args.pulls * args.batch, f"{got} messages decoded"

    consume(bodies, bounds)  # warm-up
    functools.reduce(measured_round, range(args.repeat), None)  # inside C's functools_reduce, for callgrind
    messages = args.pulls * args.batch
    return {"pulls": args.pulls, "batch": args.batch, "size": args.size,
            "ns_per_message": round(min(rounds) / messages * 1e9, 1),
            "rounds_ns_per_message": [round(r / messages * 1e9, 1) for r in rounds]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench pull_decode", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pulls", type=int, default=400, help="pull answers per round")
    parser.add_argument("--batch", type=int, default=256, help="records per answer (the compare's batched fetch)")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (the fastest is reported)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if min(args.pulls, args.batch, args.size, args.repeat) < 1:
        parser.error("--pulls, --batch, --size and --repeat must be at least 1")
    figures = run(args)
    print(json.dumps(figures) if args.json else " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
