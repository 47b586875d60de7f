"""The broker's CPU per Kafka Produce of one record, in process: a fixed workload for timing
and callgrind, the Kafka listener's twin of `skiff.bench.send_path`.

A real `BrokerServer` (its own store in a temporary directory, no NameServer) with its Kafka
listener serves one connection whose socket is an in-memory transport. The workload is N
ProduceRequests of one record each as librdkafka sends them with ``linger.ms=0`` and
``batch.num.messages=1`` (``skiff bench compare``'s single shape): acks=all, one topic, one
partition per request (the partitions in turn), a record batch v2 of one keyless record,
with ``--idempotent`` a producer id and each partition's sequence. The requests are handed
to the connection in reads of ``--per-read`` frames (what a producer with that many requests
in flight delivers per read). Everything from the read to the store and the answers' write
runs; the loop's socket syscalls do not.

    python -m skiff.bench.kafka_path --requests 20000 --per-read 64
    valgrind --tool=callgrind --toggle-collect=functools_reduce python -m skiff.bench.kafka_path --requests 4000

It prints process-CPU µs per request over the measured requests (after ``--warmup``) and
checks that every request was answered with error code 0 in request order.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import pstats
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from skiff.broker.server import BrokerServer
from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.records import Record, encode_batch
from skiff.protocol.kafka.schema import decode, encode
from skiff.protocol.kafka.wire import Reader, Writer
from skiff.testing.inprocess import MemoryTransport, in_process_broker

TOPIC = "KafkaPathBench"
PARTITIONS = 8
PRODUCER_ID = 1_000_000
CLIENT_ID = "rdkafka"
_SIZE = struct.Struct(">i")


def produce_frames(count: int, size: int, *, version: int = 7, idempotent: bool = False, first: int = 0,
                   acks: int = -1) -> list[bytes]:
    """``count`` ProduceRequest frames of one ``size``-byte record each, partitions in turn;
    ``first``: the index of the first request in the whole stream (correlation ids, sequences)."""
    api = APIS[ApiKey.PRODUCE]
    value = b"x" * size
    frames = []
    now = int(time.time() * 1000)
    for n in range(first, first + count):
        partition = n % PARTITIONS
        seq = n // PARTITIONS
        records = encode_batch(0, [Record(0, now, None, value)],
                               producer_id=PRODUCER_ID if idempotent else -1, producer_epoch=0 if idempotent else -1,
                               base_sequence=seq if idempotent else -1)
        w = Writer()
        w.int32(0)
        w.int16(ApiKey.PRODUCE)
        w.int16(version)
        w.int32(n + 1)
        w.string(CLIENT_ID, False)
        encode(w, api.request, version, {"transactional_id": None, "acks": acks, "timeout_ms": 30_000,
                                         "topic_data": [{"name": TOPIC, "partition_data": [
                                             {"index": partition, "records": records}]}]})
        _SIZE.pack_into(w.buf, 0, len(w.buf) - 4)
        frames.append(bytes(w.buf))
    return frames


def reads(frames: Sequence[bytes], per_read: int) -> list[bytes]:
    return [b"".join(frames[i:i + per_read]) for i in range(0, len(frames), per_read)]


def responses(out: bytes | bytearray, version: int = 7) -> list[tuple[int, dict[str, Any]]]:
    """(correlation id, body) of every Produce response in ``out``."""
    api = APIS[ApiKey.PRODUCE]
    found, pos = [], 0
    while pos + 4 <= len(out):
        (size,) = _SIZE.unpack_from(out, pos)
        if pos + 4 + size > len(out):
            break
        r = Reader(bytes(out[pos + 4:pos + 4 + size]))
        correlation = r.int32()
        found.append((correlation, decode(r, api.response, version)))
        pos += 4 + size
    return found


class KafkaConnection:
    """One connection of the broker's Kafka listener, fed in memory."""

    def __init__(self, broker: BrokerServer) -> None:
        assert broker.kafka is not None, "the broker serves no Kafka listener"
        self.transport = MemoryTransport()
        self.protocol = broker.kafka.connection()
        self.protocol.connection_made(self.transport)
        self.feed: Callable[[bytes], None] = self.protocol.data_received

    async def wait_answers(self, count: int, timeout_s: float = 60.0) -> None:
        """Until ``count`` whole answers were written since the output was last cleared."""
        deadline = time.monotonic() + timeout_s
        seen, pos = 0, 0
        while True:
            out = self.transport.out
            while pos + 4 <= len(out) and pos + 4 + _SIZE.unpack_from(out, pos)[0] <= len(out):
                pos += 4 + _SIZE.unpack_from(out, pos)[0]
                seen += 1
            if seen >= count:
                return
            assert time.monotonic() < deadline, f"{seen} of {count} answers within {timeout_s} s"
            await asyncio.sleep(0)


def measured(conn: KafkaConnection, chunks: Sequence[bytes]) -> None:
    """The measured part, inside C's ``functools_reduce`` for callgrind's ``--toggle-collect``."""
    functools.reduce(lambda _, chunk: conn.feed(chunk), chunks, None)


async def run(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="skiff-kafka-path-") as root:
        async with in_process_broker(root, sync_flush=args.sync_flush) as broker:
            await broker.start_kafka(0)
            broker.topics.find_or_create(TOPIC, PARTITIONS, 6)
            conn = KafkaConnection(broker)
            shape = {"version": args.version, "idempotent": args.idempotent}
            warm = reads(produce_frames(args.warmup, args.size, **shape), args.per_read)
            chunks = reads(produce_frames(args.requests, args.size, first=args.warmup, **shape), args.per_read)
            measured(conn, warm)
            await conn.wait_answers(args.warmup)
            conn.transport.out.clear()
            profile = cProfile.Profile() if args.profile else None
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            if profile is not None:
                profile.enable()
            measured(conn, chunks)
            await conn.wait_answers(args.requests)
            if profile is not None:
                profile.disable()
            cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started_wall
            if profile is not None:
                pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
            answers = responses(conn.transport.out, args.version)
            order = [c for c, _ in answers] == list(range(args.warmup + 1, args.warmup + args.requests + 1))
            bad = [b for _, b in answers for t in b["responses"] for p in t["partition_responses"] if p["error_code"]]
            assert len(answers) == args.requests and order and not bad, \
                f"{len(answers)} answers, in order: {order}, failed: {bad[:1]}"
            return {"requests": args.requests, "per_read": args.per_read, "idempotent": int(args.idempotent),
                    "cpu_us_per_request": round(cpu_s / args.requests * 1e6, 2),
                    "wall_us_per_request": round(wall_s / args.requests * 1e6, 2), "writes": conn.transport.writes}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.kafka_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--per-read", type=int, default=64, help="requests per read (a producer's requests in flight)")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--version", type=int, default=7, help="ProduceRequest version (librdkafka 2.x: 7)")
    parser.add_argument("--idempotent", action="store_true", help="an idempotent producer's batches (sequences)")
    parser.add_argument("--sync-flush", action="store_true", help="SYNC_FLUSH (answers after the group fsync)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's N functions of most own time over the measured requests")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    figures = asyncio.run(run(parse_args(argv)))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
