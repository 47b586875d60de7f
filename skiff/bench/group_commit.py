"""SYNC_FLUSH group commit in a closed loop, in process, with an fsync of a set duration.

A real `BrokerServer` (SYNC_FLUSH, its own store in a temporary directory) serves one
in-memory connection (`skiff.testing.inprocess`), and a producer with ``--inflight``
single sends outstanding answers it: each answer it reads is followed by one new send,
``--client-us`` apart (what a producer spends per answer and send), each in a read of
its own. The CommitLog's fsync is replaced by a sleep of ``--fsync-ms`` (the GIL released,
as in the real one), so the group commit's shape can be measured apart from a shared
disk's noise: how many sends one fsync answers, and the rate that gives. ``--real-fsync``
keeps the disk's own. Every answer is checked as it is written: SUCCESS, and its record
below the CommitLog's flushed offset (a benchmark that answered early would measure a
broken promise; this check found one, docs/performance.md, "SYNC_FLUSH single sends").

    python -m skiff.bench.group_commit --fsync-ms 2 --inflight 64 --requests 20000

On a quick disk the producer bounds the rate; on a slow one the sends per fsync do.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from skiff.bench.send_path import QUEUES, TOPIC, request_frames
from skiff.common.msgid import decode_offset_msg_id
from skiff.protocol.codes import ResponseCode
from skiff.protocol.frame import FrameDecoder
from skiff.testing.inprocess import ServedConnection, in_process_broker


def _then(method: Callable[[Any], None], after: Callable[[Any], None]) -> Callable[[Any], None]:
    def call(data: Any) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            data = list(data)  # writelines may be given an iterator: read once, here
        after(data)
        method(data)
    return call


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="skiff-group-commit-") as root:
        async with in_process_broker(root, sync_flush=True) as broker:
            broker.topics.find_or_create(TOPIC, QUEUES, 6)
            files = broker.store.commitlog.files
            if not args.real_fsync:
                fsync_s = args.fsync_ms / 1000

                def sync_range(lo: int, hi: int) -> int:
                    time.sleep(fsync_s)
                    return 1
                setattr(files, "sync_range", sync_range)
            served = ServedConnection(broker)
            loop = asyncio.get_running_loop()
            frames = iter(request_frames(args.requests, args.size))
            decoder = FrameDecoder(1 << 24)
            answered = failed = early = 0
            done = loop.create_future()
            client_s = args.client_us / 1e6
            next_send = [0.0]

            def send_one() -> None:
                frame = next(frames, None)
                if frame is not None:
                    served.feed(frame)

            def on_write() -> None:
                nonlocal answered, failed
                out = served.transport.out
                got = decoder.feed(bytes(out))
                out.clear()
                for answer in got:
                    answered += 1
                    failed += answer.code != ResponseCode.SUCCESS
                    # the producer handles answers one after another, and sends after each
                    next_send[0] = max(next_send[0], loop.time()) + client_s
                    loop.call_at(next_send[0], send_one)
                if answered >= args.requests and not done.done():
                    done.set_result(None)

            written = FrameDecoder(1 << 24)

            def check(data: Any) -> None:
                """Every answer as it is written: its record below the flushed offset."""
                nonlocal early
                flushed = broker.store.commitlog.flushed
                for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                    for answer in written.feed(bytes(part)):
                        early += decode_offset_msg_id(answer.ext("msgId") or "").physical_offset >= flushed
                loop.call_soon(on_write)  # the producer reads the answers in the next loop step
            transport = served.transport
            for name in ("write", "writelines"):
                setattr(transport, name, _then(getattr(transport, name), check))

            fsyncs_before = broker.store.stats().fsync_count
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            for _ in range(args.inflight):
                send_one()
            await asyncio.wait_for(done, args.timeout)
            cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started_wall
            fsyncs = broker.store.stats().fsync_count - fsyncs_before
            assert failed == 0, f"{failed} sends failed"
            assert early == 0, f"{early} sends answered before the fsync covering them"
            return {"requests": answered, "inflight": args.inflight, "fsync_ms": "real" if args.real_fsync
                    else args.fsync_ms, "client_us": args.client_us, "msg_per_s": round(answered / wall_s),
                    "fsyncs": fsyncs, "sends_per_fsync": round(answered / max(fsyncs, 1), 1),
                    "cpu_us_per_send": round(cpu_s / answered * 1e6, 2)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.group_commit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--inflight", type=int, default=64, help="the producer's sends outstanding")
    parser.add_argument("--fsync-ms", type=float, default=2.0, help="what one fsync takes")
    parser.add_argument("--real-fsync", action="store_true", help="the disk's own fsync instead")
    parser.add_argument("--client-us", type=float, default=40.0, help="the producer's time per answer and send")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds the whole run may take")
    args = parser.parse_args(argv)
    if args.requests < args.inflight or args.inflight < 1:
        parser.error("--requests must be at least --inflight, and --inflight at least 1")
    figures = asyncio.run(run(args))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
