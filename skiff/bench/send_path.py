"""The broker's CPU per single send, in process: a fixed workload for timing and callgrind.

A real `BrokerServer` (its own store in a temporary directory, no NameServer) serves one
`Connection` whose socket is replaced by an in-memory transport. The workload is N
SEND_MESSAGE_V2 requests of one message each, as our producer sends them (V2 header,
UNIQ_KEY and WAIT properties, the queues taken in turn), handed to the connection's
``data_received`` in reads of ``--per-read`` frames: what a producer with that many sends
in flight delivers per read. Everything the broker does for a send runs: frame split,
header decode, the gate, the writer's row, the store's append and dispatch, the answer's
encoding and the gathered write. The loop's own socket read and write syscalls do not.

    python -m skiff.bench.send_path --requests 20000 --per-read 64
    valgrind --tool=callgrind --toggle-collect=functools_reduce python -m skiff.bench.send_path --requests 4000

It prints process-CPU µs per request over the measured requests (after ``--warmup``), and
checks that every request got a SUCCESS answer (a benchmark that measures failures
measures nothing). Under callgrind, ``--toggle-collect=functools_reduce`` counts the
measured requests' instructions alone (see `measured`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import tempfile
import time
from collections.abc import Sequence

from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import DEDUP_WINDOW_MS
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import encode_frame_bytes
from skiff.protocol.message_codec import send_properties
from skiff.testing.inprocess import ServedConnection, in_process_broker
from skiff.testing.wire import send_header

TOPIC = "SendPathBench"
QUEUES = 4


def request_frames(count: int, size: int) -> list[bytes]:
    """``count`` SEND_MESSAGE_V2 frames of one ``size``-byte message each, queues in turn."""
    body = b"x" * size
    frames = []
    for i in range(count):
        props = send_properties(Message.of(TOPIC, body), UNIQ_IDS.next_id())
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                      send_header(RequestCode.SEND_MESSAGE_V2, TOPIC, i % QUEUES, props), body)
        cmd.opaque = i + 1
        frames.append(encode_frame_bytes(cmd))
    return frames


def reads(frames: Sequence[bytes], per_read: int) -> list[bytes]:
    return [b"".join(frames[i:i + per_read]) for i in range(0, len(frames), per_read)]


def measured(served: ServedConnection, chunks: Sequence[bytes]) -> None:
    """The measured part, run inside C's ``functools_reduce`` so that callgrind can count it
    alone (``--toggle-collect=functools_reduce``): Python functions are no symbols to it."""
    functools.reduce(lambda _, chunk: served.feed(chunk), chunks, None)


async def run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="skiff-send-path-") as root:
        async with in_process_broker(root, sync_flush=args.sync_flush) as broker:
            attributes = {DEDUP_WINDOW_MS: str(args.dedup_window_ms)} if args.dedup_window_ms else {}
            broker.topics.put(TopicConfig(TOPIC, QUEUES, QUEUES, attributes=attributes))
            served = ServedConnection(broker)
            warm = reads(request_frames(args.warmup, args.size), args.per_read)
            chunks = reads(request_frames(args.requests, args.size), args.per_read)
            measured(served, warm)
            await served.wait_answers(args.warmup)
            served.transport.out.clear()
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            measured(served, chunks)
            await served.wait_answers(args.requests)
            cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started_wall
            answers = served.answers()
            bad = [a for a in answers if a.code != ResponseCode.SUCCESS]
            assert len(answers) == args.requests and not bad, f"{len(answers)} answers, failed: {bad[:1]}"
            return {"requests": args.requests, "per_read": args.per_read, "cpu_us_per_request":
                    round(cpu_s / args.requests * 1e6, 2), "wall_us_per_request": round(wall_s / args.requests * 1e6, 2),
                    "writes": served.transport.writes}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.send_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--per-read", type=int, default=64, help="frames per read (a producer's sends in flight)")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--sync-flush", action="store_true", help="SYNC_FLUSH (answers after the group fsync)")
    parser.add_argument("--dedup-window-ms", type=int, default=0,
                        help="the topic's duplicate window (dedup.window.ms; 0: none); every send's key is new")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
