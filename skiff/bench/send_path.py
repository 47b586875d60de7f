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
from typing import Any

from skiff.broker.config import BrokerConfig
from skiff.broker.server import BrokerServer
from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes
from skiff.protocol.message_codec import send_properties
from skiff.store.config import FlushDiskType, StoreConfig
from skiff.testing.wire import send_header
from skiff.transport.connection import Connection

TOPIC = "SendPathBench"
QUEUES = 4


class MemoryTransport(asyncio.Transport):
    """A transport that keeps what is written (the answers), for a connection without a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.writes = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: Any) -> None:
        self.out += data
        self.writes += 1

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.out += data
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


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


def measured(conn: Connection, chunks: Sequence[bytes]) -> None:
    """The measured part, run inside C's ``functools_reduce`` so that callgrind can count it
    alone (``--toggle-collect=functools_reduce``): Python functions are no symbols to it."""
    functools.reduce(lambda _, chunk: conn.data_received(chunk), chunks, None)


async def run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="skiff-send-path-") as root:
        flush = FlushDiskType.SYNC_FLUSH if args.sync_flush else FlushDiskType.ASYNC_FLUSH
        broker = BrokerServer(BrokerConfig(listen_port=0, listen_host="127.0.0.1", grpc_server_port=0),
                              StoreConfig(store_path_root_dir=root, flush_disk_type=flush,
                                          mapped_file_size_commit_log=256 << 20))
        await broker.start()
        try:
            broker.topics.find_or_create(TOPIC, QUEUES, 6)
            conn = Connection(broker._remoting._handlers)  # type: ignore[union-attr]
            transport = MemoryTransport()
            conn.connection_made(transport)
            warm = reads(request_frames(args.warmup, args.size), args.per_read)
            chunks = reads(request_frames(args.requests, args.size), args.per_read)
            measured(conn, warm)
            await _settled(transport, args.warmup)
            transport.out.clear()
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            measured(conn, chunks)
            await _settled(transport, args.requests)
            cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started_wall
            _check(bytes(transport.out), args.requests)
            return {"requests": args.requests, "per_read": args.per_read, "cpu_us_per_request":
                    round(cpu_s / args.requests * 1e6, 2), "wall_us_per_request": round(wall_s / args.requests * 1e6, 2),
                    "writes": transport.writes}
        finally:
            await broker.stop()


async def _settled(transport: MemoryTransport, count: int) -> None:
    """Until ``count`` answers were written (SYNC_FLUSH answers after the fsync)."""
    decoder = FrameDecoder(1 << 26)
    seen = 0
    pos = 0
    deadline = time.monotonic() + 60
    while seen < count:
        data = bytes(transport.out[pos:])
        pos = len(transport.out)
        seen += len(decoder.feed(data))
        if seen < count:
            assert time.monotonic() < deadline, f"{seen} of {count} answers"
            await asyncio.sleep(0)


def _check(out: bytes, count: int) -> None:
    answers = FrameDecoder(1 << 26).feed(out)
    bad = [a for a in answers if a.code != ResponseCode.SUCCESS]
    assert len(answers) == count and not bad, f"{len(answers)} answers of {count}, failed: {bad[:1]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.send_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--per-read", type=int, default=64, help="frames per read (a producer's sends in flight)")
    parser.add_argument("--size", type=int, default=100, help="body bytes")
    parser.add_argument("--sync-flush", action="store_true", help="SYNC_FLUSH (answers after the group fsync)")
    args = parser.parse_args(argv)
    figures = asyncio.run(run(args))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
