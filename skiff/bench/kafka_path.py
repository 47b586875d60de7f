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
    python -m skiff.bench.kafka_path --requests 4000 --per-read 8 --records 256  # librdkafka's batches
    valgrind --tool=callgrind --toggle-collect=functools_reduce python -m skiff.bench.kafka_path --requests 4000

With ``--records N`` each request carries one batch of N records (``skiff bench compare``'s
batched shape); ``cpu_us_per_record`` is then the figure to compare.

It prints process-CPU µs per request over the measured requests (after ``--warmup``) and
checks that every request was answered with error code 0 in request order.

``--fetch`` measures the other direction, a consumer draining a backlog: ``--requests``
messages are produced as above (not measured), then read by FetchRequests v11 of one
partition each from where the previous answer ended (as many as the byte limits let an answer
hold: 1,024, a store read, at 100 bytes; fewer at 1 KiB), twice: the first drain warms up and
finds where each Fetch starts, the second is measured with the same Fetches. It prints CPU µs per fetched message and
checks that every message was served once, without an error. A Fetch is answered by a task
(not inside ``feed``), so for callgrind compare whole runs of the same size.

    python -m skiff.bench.kafka_path --fetch --requests 40000

``--stored-batch`` times the Fetch kernel alone, user and system CPU and page faults per call:

    python -m skiff.bench.kafka_path --stored-batch --requests 200 --size 1024
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import pstats
import resource
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from skiff.broker.kafka.mapping import raw_record
from skiff.broker.server import BrokerServer
from skiff.common.limits import PULL_MAX_MESSAGES
from skiff.common.record import pack_host, record_size, write_record
from skiff.protocol.kafka.apis import APIS, ApiKey
from skiff.protocol.kafka.frames import encode_request
from skiff.protocol.kafka.records import Record, encode_batch
from skiff.protocol.kafka.schema import decode
from skiff.transport.allocator import tune_for_server
from skiff.protocol.kafka.stored_batch import stored_batch
from skiff.protocol.kafka.wire import Reader
from skiff.testing.inprocess import MemoryTransport, in_process_broker

TOPIC = "KafkaPathBench"
PARTITIONS = 8
PRODUCER_ID = 1_000_000
CLIENT_ID = "rdkafka"
FETCH_PARTITION_BYTES = 1 << 20
"""A Fetch's byte limit per partition (and per request): librdkafka's default ``max.partition.fetch.bytes``."""
_SIZE = struct.Struct(">i")
_BATCH_BASE = struct.Struct(">q")
"""A record batch's base offset (bytes 0-7); its last offset delta is the ``>i`` at 23."""
_RECORD_COUNT = struct.Struct(">i")
"""A record batch's record count, its header's last field (bytes 57-60)."""


def produce_frames(count: int, size: int, *, version: int = 7, idempotent: bool = False, first: int = 0,
                   acks: int = -1, records: int = 1) -> list[bytes]:
    """``count`` ProduceRequest frames of a batch of ``records`` ``size``-byte records each,
    partitions in turn; ``first``: the index of the first request in the whole stream
    (correlation ids, sequences)."""
    api = APIS[ApiKey.PRODUCE]
    value = b"x" * size
    frames = []
    now = int(time.time() * 1000)
    for n in range(first, first + count):
        partition = n % PARTITIONS
        seq = n // PARTITIONS * records
        batch = encode_batch(0, [Record(i, now, None, value) for i in range(records)],
                             producer_id=PRODUCER_ID if idempotent else -1, producer_epoch=0 if idempotent else -1,
                             base_sequence=seq if idempotent else -1)
        frames.append(_frame(ApiKey.PRODUCE, version, n + 1, {
            "transactional_id": None, "acks": acks, "timeout_ms": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}]}))
    return frames


def fetch_frames(starts: Sequence[tuple[int, int]], *, version: int = 11, first: int = 0) -> list[bytes]:
    """One FetchRequest frame per (partition, fetch offset) of ``starts``, of that partition
    alone, with librdkafka's default byte limits; ``first``: the first correlation id's index."""
    return [_frame(ApiKey.FETCH, version, first + n + 1, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": FETCH_PARTITION_BYTES, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": TOPIC, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": FETCH_PARTITION_BYTES}]}]})
        for n, (partition, offset) in enumerate(starts)]


async def drained(conn: KafkaConnection, per_partition: int) -> list[tuple[int, int]]:
    """Every partition read by Fetch from offset 0 to ``per_partition``, each Fetch from where the
    previous answer ended (as a consumer draining a backlog asks: how many an answer holds depends
    on the record size and the byte limits); the (partition, fetch offset) of each Fetch."""
    starts: list[tuple[int, int]] = []
    for partition in range(PARTITIONS):
        offset = 0
        while offset < per_partition:
            conn.transport.out.clear()
            conn.feed(fetch_frames([(partition, offset)], first=len(starts))[0])
            await conn.wait_answers(1)
            records = responses(conn.transport.out, 11, ApiKey.FETCH)[0][1]["responses"][0]["partitions"][0]["records"]
            assert records, f"partition {partition} at {offset} of {per_partition}: nothing served"
            starts.append((partition, offset))
            offset = _BATCH_BASE.unpack_from(records, 0)[0] + _SIZE.unpack_from(records, 23)[0] + 1
    conn.transport.out.clear()
    return starts


def _frame(api_key: ApiKey, version: int, correlation: int, body: dict[str, Any]) -> bytes:
    return encode_request(api_key, version, correlation, body, CLIENT_ID)


def reads(frames: Sequence[bytes], per_read: int, read_bytes: int = 0) -> list[bytes]:
    """The frames in reads of ``per_read`` frames each or, with ``read_bytes``, the stream cut
    into reads of that many bytes whatever the frames (a socket read gives at most 256 KiB)."""
    if read_bytes:
        stream = b"".join(frames)
        return [stream[i:i + read_bytes] for i in range(0, len(stream), read_bytes)]
    return [b"".join(frames[i:i + per_read]) for i in range(0, len(frames), per_read)]


def responses(out: bytes | bytearray, version: int = 7, api_key: ApiKey = ApiKey.PRODUCE
              ) -> list[tuple[int, dict[str, Any]]]:
    """(correlation id, body) of every response of ``api_key`` in ``out``."""
    api = APIS[api_key]
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
            return await (_fetch(conn, args) if args.fetch else _produce(conn, args))


async def _produce(conn: KafkaConnection, args: argparse.Namespace) -> dict[str, float]:
    shape = {"version": args.version, "idempotent": args.idempotent, "records": args.records}
    warm = reads(produce_frames(args.warmup, args.size, **shape), args.per_read, args.read_bytes)
    chunks = reads(produce_frames(args.requests, args.size, first=args.warmup, **shape), args.per_read,
                   args.read_bytes)
    measured(conn, warm)
    await conn.wait_answers(args.warmup)
    conn.transport.out.clear()
    cpu_s, wall_s, faults = await _timed(conn, chunks, args.requests, args.profile)
    answers = responses(conn.transport.out, args.version)
    order = [c for c, _ in answers] == list(range(args.warmup + 1, args.warmup + args.requests + 1))
    bad = [b for _, b in answers for t in b["responses"] for p in t["partition_responses"] if p["error_code"]]
    assert len(answers) == args.requests and order and not bad, \
        f"{len(answers)} answers, in order: {order}, failed: {bad[:1]}"
    return {"requests": args.requests, "per_read": args.per_read, "idempotent": int(args.idempotent),
            "records": args.records, "cpu_us_per_record": round(cpu_s / args.requests / args.records * 1e6, 3),
            "cpu_us_per_request": round(cpu_s / args.requests * 1e6, 2),
            "wall_us_per_request": round(wall_s / args.requests * 1e6, 2), "writes": conn.transport.writes,
            "minor_faults_per_request": round(faults / args.requests, 1)}


async def _fetch(conn: KafkaConnection, args: argparse.Namespace) -> dict[str, float]:
    """``--requests`` messages produced (not measured), then drained twice by Fetch: the first
    drain warms up (and finds where each Fetch starts), the second is measured."""
    per_partition = -(-args.requests // PARTITIONS)
    produced = per_partition * PARTITIONS
    measured(conn, reads(produce_frames(produced, args.size), args.per_read))
    await conn.wait_answers(produced)
    conn.transport.out.clear()
    starts = await drained(conn, per_partition)  # the warm-up drain
    frames = fetch_frames(starts, first=len(starts))
    cpu_s, wall_s, faults = await _timed(conn, reads(frames, 1), len(frames), args.profile)
    answers = responses(conn.transport.out, 11, ApiKey.FETCH)
    parts = [p for _, b in answers for t in b["responses"] for p in t["partitions"]]
    served = sum(_RECORD_COUNT.unpack_from(p["records"], 57)[0] for p in parts if p["records"])
    bad = [p["error_code"] for p in parts if p["error_code"]]
    assert len(answers) == len(frames) and served == produced and not bad, \
        f"{len(answers)} of {len(frames)} answers, {served} of {produced} messages, errors {bad[:1]}"
    return {"fetches": len(frames), "messages": served, "cpu_us_per_message": round(cpu_s / served * 1e6, 3),
            "wall_us_per_message": round(wall_s / served * 1e6, 3), "writes": conn.transport.writes,
            "minor_faults_per_fetch": round(faults / len(frames), 1)}


def stored_batch_calls(args: argparse.Namespace) -> dict[str, float]:
    """``--stored-batch``: the Fetch kernel alone (`stored_batch`) over one pull of PULL_MAX_MESSAGES
    stored ``--size``-byte messages without properties, 1 MiB allowed: user and system CPU µs and
    minor page faults per call, best of 7 rounds of ``--requests`` calls. The system share is
    the fresh pages of a batch that malloc maps anew (past its mmap threshold, 128 KiB at first)."""
    body = b"x" * args.size
    host = pack_host("127.0.0.1", 10911)
    data = bytearray()
    for n in range(PULL_MAX_MESSAGES):
        buf = bytearray(record_size(len(body), len(TOPIC), 0, len(host), len(host)))
        write_record(buf, 0, queue_id=0, flag=0, queue_offset=n, physical_offset=len(data), sys_flag=0,
                     born_timestamp=1_700_000_000_000 + n, born_host=host, store_timestamp=1_700_000_000_000 + n,
                     store_host=host, reconsume_times=0, prepared_transaction_offset=0, body=body,
                     topic=TOPIC.encode(), properties=b"")
        data += buf
    pulled = bytes(data)
    best = (float("inf"), 0.0, 0.0)
    for _ in range(7):
        before = resource.getrusage(resource.RUSAGE_SELF)
        functools.reduce(lambda _, __: stored_batch(pulled, FETCH_PARTITION_BYTES, True, raw_record),
                         range(args.requests), None)
        after = resource.getrusage(resource.RUSAGE_SELF)
        n = args.requests
        user, system = (after.ru_utime - before.ru_utime) / n * 1e6, (after.ru_stime - before.ru_stime) / n * 1e6
        best = min(best, (user + system, user, system))
        faults = (after.ru_minflt - before.ru_minflt) / n
    return {"calls": args.requests, "cpu_us_per_call": round(best[0], 1), "user_us": round(best[1], 1),
            "system_us": round(best[2], 1), "minor_faults_per_call": round(faults, 1)}


async def _timed(conn: KafkaConnection, chunks: Sequence[bytes], answers: int, profile_rows: int
                 ) -> tuple[float, float, int]:
    """Process CPU and wall seconds and minor page faults to feed ``chunks`` until ``answers``
    answers are written;
    with ``profile_rows``, cProfile's functions of most own time printed."""
    profile = cProfile.Profile() if profile_rows else None
    started_faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    started_cpu, started_wall = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    measured(conn, chunks)
    await conn.wait_answers(answers)
    if profile is not None:
        profile.disable()
    cpu_s, wall_s = time.process_time() - started_cpu, time.perf_counter() - started_wall
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - started_faults
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(profile_rows)
    return cpu_s, wall_s, faults


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m skiff.bench.kafka_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--per-read", type=int, default=64, help="requests per read (a producer's requests in flight)")
    parser.add_argument("--read-bytes", type=int, default=0, metavar="N",
                        help="cut the requests into reads of N bytes instead (frames span reads; a socket "
                             "read gives at most 262144)")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--version", type=int, default=7, help="ProduceRequest version (librdkafka 2.x: 7)")
    parser.add_argument("--records", type=int, default=1,
                        help="records per batch (one batch per request; librdkafka's defaults batch many)")
    parser.add_argument("--idempotent", action="store_true", help="an idempotent producer's batches (sequences)")
    parser.add_argument("--fetch", action="store_true",
                        help="measure Fetch instead: --requests messages produced, then drained by Fetch, µs per message")
    parser.add_argument("--stored-batch", action="store_true",
                        help="measure the Fetch kernel alone: --requests calls over 1,024 stored --size-byte messages")
    parser.add_argument("--sync-flush", action="store_true", help="SYNC_FLUSH (answers after the group fsync)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print cProfile's N functions of most own time over the measured requests")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tune_for_server()  # as the broker's process is (`skiff.transport.loop.run`)
    figures = stored_batch_calls(args) if args.stored_batch else asyncio.run(run(args))
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
