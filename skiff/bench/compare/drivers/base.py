"""What every client driver implements, the message body, and the consumer's tally.

A driver is one system's best Python client used the way its documentation
recommends for throughput. The worker process owns the loops (how many
batches are in flight, when to stop); a driver only publishes one batch and
feeds received bodies to a `Recorder`.

Message body (every system carries the same bytes, big-endian):

| offset | size | field                                             |
|--------|------|---------------------------------------------------|
| 0      | 8    | send time, `time.monotonic_ns()` of the producer   |
| 8      | 8    | sequence number, 0 .. count-1                      |
| 16     | n-16 | zero filler up to the message size                 |

`CLOCK_MONOTONIC` is one clock for every process on a Linux host, so the
consumer process subtracts the producer's stamp from its own reading.
"""

from __future__ import annotations

import asyncio
import operator
import struct
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

BODY_HEAD = struct.Struct(">QQ")
assert BODY_HEAD.size == 16
BODY_MIN_BYTES = BODY_HEAD.size

CONSUMER_GROUP = "bench"
_HEAD_OF = operator.itemgetter(slice(0, BODY_HEAD.size))
VECTOR_MIN_BODIES = 64
"""From this many bodies in one delivery on, `Recorder.add` counts them in numpy passes: their
fixed cost (~6 µs) is then below what the bodies cost counted one by one (~0.2 µs each; break-even
near 36). A client that delivers one message per callback (RabbitMQ's) keeps the per-body count."""


@dataclass(frozen=True, slots=True)
class DriverOptions:
    """Knobs shared by every driver, so each system is driven with the same sizes."""

    batch: int
    """Messages per publish call / pipeline / fetch."""
    size_bytes: int
    queues: int = 8
    """Queues per topic where the system has that notion (Skiff)."""
    fetch: int = 0
    """Messages per consumer fetch / pull / prefetch; 0: ``batch``. The single-message shape
    publishes one message per request and fetches 32, as RocketMQ's push consumers pull."""

    @property
    def fetch_count(self) -> int:
        return self.fetch or self.batch


class BodyFactory:
    """Builds batches of bodies that carry the send time and a sequence number."""

    def __init__(self, size_bytes: int) -> None:
        if size_bytes < BODY_MIN_BYTES:
            raise ValueError(f"message size must be at least {BODY_MIN_BYTES} bytes, got {size_bytes}")
        self._filler = bytes(size_bytes - BODY_MIN_BYTES)

    def batch(self, first_seq: int, n: int) -> list[bytes]:
        now = time.monotonic_ns()
        pack, filler = BODY_HEAD.pack, self._filler
        return [pack(now, seq) + filler for seq in range(first_seq, first_seq + n)]


class Recorder:
    """Counts what a consumer receives: distinct sequence numbers and end-to-end latency."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.received = 0
        self.t_first_ns = 0
        self.t_last_ns = 0
        self._seen = np.zeros(max(expected, 1), dtype=np.bool_)
        self._latency_ns = np.zeros(max(expected, 1), dtype=np.int64)
        self._n_latency = 0
        self.out_of_range = 0
        self.ready = asyncio.Event()
        self.done = asyncio.Event()

    def add(self, bodies: Iterable[bytes | memoryview]) -> None:
        """Count the bodies of one delivery, all received now: each one's sequence number and
        latency. A delivery of a few is counted body by body; a larger one (a fetch or a poll) in
        numpy passes over the bodies' heads, the same figures without Python work per message."""
        now = time.monotonic_ns()
        if not self.t_first_ns:
            self.t_first_ns = now
        heads = list(map(_HEAD_OF, bodies))
        if len(heads) >= VECTOR_MIN_BODIES:
            self._add_heads(now, heads)
        else:
            self._add_each(now, heads)
        self.t_last_ns = now
        self.set_expected(self.expected)

    def _add_heads(self, now: int, heads: list[bytes | memoryview]) -> None:
        raw = b"".join(heads)
        if len(raw) != BODY_HEAD.size * len(heads):
            raise ValueError(f"a body is shorter than its {BODY_HEAD.size}-byte head")
        columns = np.frombuffer(raw, dtype=">u8").reshape(-1, 2)
        stamps, seqs = columns[:, 0], columns[:, 1]
        in_range = seqs < len(self._seen)
        if not in_range.all():
            self.out_of_range += int(len(seqs) - np.count_nonzero(in_range))
            stamps, seqs = stamps[in_range], seqs[in_range]
        self._seen[seqs] = True
        n = self._n_latency
        take = min(len(seqs), len(self._latency_ns) - n)
        self._latency_ns[n:n + take] = now - stamps[:take].astype(np.int64)
        self._n_latency = n + take
        self.received += len(seqs)

    def _add_each(self, now: int, heads: list[bytes | memoryview]) -> None:
        unpack, seen, lat = BODY_HEAD.unpack_from, self._seen, self._latency_ns
        limit = len(seen)
        n = self._n_latency
        for body in heads:
            stamp, seq = unpack(body)
            if seq >= limit:
                self.out_of_range += 1
                continue
            seen[seq] = True
            if n < limit:
                lat[n] = now - stamp
                n += 1
            self.received += 1
        self._n_latency = n

    def set_expected(self, expected: int) -> None:
        """Lower the target once the producer says how many it really sent."""
        self.expected = expected
        if self.received >= expected:
            self.done.set()

    def summary(self) -> dict[str, Any]:
        lat_ms = self._latency_ns[: self._n_latency] / 1e6
        p50, p99 = np.percentile(lat_ms, [50, 99]) if len(lat_ms) else (float("nan"), float("nan"))
        return {
            "received": self.received,
            "distinct": int(np.count_nonzero(self._seen)),
            "out_of_range": self.out_of_range,
            "t_first_ns": self.t_first_ns,
            "t_last_ns": self.t_last_ns,
            "p50_ms": float(p50),
            "p99_ms": float(p99),
        }


class Driver(ABC):
    """One system's client. Every method runs on the worker's event loop."""

    how: ClassVar[str]
    """How the client is driven, in words, for the report."""

    def __init__(self, endpoint: dict[str, Any], options: DriverOptions) -> None:
        self.endpoint = endpoint
        self.options = options

    @abstractmethod
    async def connect(self) -> None: ...

    @abstractmethod
    async def prepare(self, topic: str) -> None:
        """Create the stream/queue/topic if it is missing (idempotent)."""

    @abstractmethod
    async def publish(self, topic: str, bodies: list[bytes]) -> Awaitable[Any]:
        """Send one batch; the returned awaitable completes when the broker acknowledged all of it."""

    @abstractmethod
    async def consume(self, topic: str, recorder: Recorder) -> None:
        """Feed received bodies to ``recorder`` until ``recorder.done``; set ``recorder.ready`` once subscribed."""

    async def delete(self, topic: str) -> None:
        """Remove the topic and its data (frees disk and memory between workloads)."""

    @abstractmethod
    async def close(self) -> None: ...

