"""The figures one run produces: rows of the tables, ceilings, the many-queues curve."""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any

MB = 1_000_000
"""Throughput is in MB/s of message bodies, 10^6 bytes."""


class Workload(enum.StrEnum):
    E2E = "e2e"
    """1 producer + 1 consumer at once; latency from the send stamp in the body."""
    PRODUCE = "produce"
    """Producer alone, every message acknowledged by the broker."""
    DRAIN = "drain"
    """Consumer alone, reading a backlog written before."""


class Mode(enum.StrEnum):
    NORMAL = "normal"
    DURABLE = "durable"


class Shape(enum.StrEnum):
    """How messages travel: in batches (``--batch`` per request), or one per request as
    RocketMQ applications send them (``DefaultMQProducer.send``), consumers fetching 32."""

    BATCHED = "batched"
    SINGLE = "single"


@dataclass(frozen=True, slots=True)
class Row:
    system: str
    mode: Mode
    workload: Workload
    size_bytes: int
    messages: int
    seconds: float
    broker_cpu_s: float
    peak_rss_bytes: int
    p50_ms: float | None = None
    p99_ms: float | None = None
    ok: bool = True
    note: str = ""
    shape: Shape = Shape.BATCHED

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.msgs_per_s * self.size_bytes / MB

    @property
    def cpu_s_per_million(self) -> float:
        return self.broker_cpu_s / self.messages * 1e6 if self.messages else math.nan

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(msgs_per_s=self.msgs_per_s, mb_per_s=self.mb_per_s, cpu_s_per_million=self.cpu_s_per_million)
        return out


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What the machine itself can do: the bounds every broker lives under."""

    disk_write_mb_per_s: float
    disk_write_fsync_mb_per_s: float
    disk_write_bytes: int
    fsyncs_per_s: float
    loopback_mb_per_s: float


@dataclass(frozen=True, slots=True)
class QueuesPoint:
    queues: int
    topics: int
    messages: int
    seconds: float
    ok: bool = True
    note: str = ""

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


@dataclass
class RunResult:
    meta: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    """'<server> server' → configuration in force; '<system> client' → how its client was driven."""
    ceilings: Ceilings | None = None
    rows: list[Row] = field(default_factory=list)
    many_queues: list[QueuesPoint] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": self.meta,
            "settings": self.settings,
            "ceilings": asdict(self.ceilings) if self.ceilings else None,
            "rows": [r.to_json() for r in self.rows],
            "many_queues": [{**asdict(p), "msgs_per_s": p.msgs_per_s} for p in self.many_queues],
            "failures": self.failures,
        }
