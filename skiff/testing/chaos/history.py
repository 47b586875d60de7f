"""The history of a chaos run, one tab-separated line per event, in OpenChaos's shape so its
checkers' rules apply unchanged:

    client  op       type      result   value  shardingKey  timestamp_ms  latency_ms  extra
    p3      enqueue  INVOKE            k3-17  k3           1732...       0
    p3      enqueue  RESPONSE  SUCCESS  k3-17  k3           1732...       12          SEND_OK
    orderly dequeue  RESPONSE  SUCCESS  k3-17  k3           1732...       0           q2@154
    fault   kill-master  start  broker-2            1732...       0           pid 4120

``result`` of an enqueue is SUCCESS only for SEND_OK (OpenChaos's RocketMQ driver also counts
FLUSH_SLAVE_TIMEOUT as success; a message the slave may not have is not acknowledged here),
FAILURE for a definite refusal (nothing stored), UNKNOWN for everything else (no answer,
a timeout, stored on the master without its slave's copy). A dequeue's client is its consumer
group, so each group's deliveries are checked on their own. A fault line has the fault's
name in ``op``, ``start`` or ``end`` in ``type`` and the nodes it hit in ``result``.
Timestamps are wall-clock milliseconds, one clock for every process of the run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple, TextIO

FAULT_CLIENT = "fault"
"""The client column of a fault's lines (OpenChaos's)."""


class Op(StrEnum):
    ENQUEUE = "enqueue"
    DEQUEUE = "dequeue"


class Kind(StrEnum):
    INVOKE = "INVOKE"
    RESPONSE = "RESPONSE"
    START = "start"
    END = "end"


class Result(StrEnum):
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    UNKNOWN = "UNKNOWN"


class Event(NamedTuple):
    """One line of the history."""

    client: str
    op: str
    kind: str
    result: str
    value: str
    key: str
    t_ms: int
    latency_ms: int = 0
    extra: str = ""

    @property
    def is_fault(self) -> bool:
        return self.client == FAULT_CLIENT

    @property
    def invoked_ms(self) -> int:
        """When the operation began: a response's time less its latency."""
        return self.t_ms - self.latency_ms

    def line(self) -> str:
        return "\t".join(_clean(str(f)) for f in self) + "\n"

    @classmethod
    def parse(cls, line: str) -> Event:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != len(cls._fields):
            raise ValueError(f"a history line has {len(cls._fields)} tab-separated fields, not {len(fields)}: {line!r}")
        client, op, kind, result, value, key, t_ms, latency_ms, extra = fields
        return cls(client, op, kind, result, value, key, int(t_ms), int(latency_ms), extra)


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ")


def now_ms() -> int:
    return int(time.time() * 1000)


def fault_event(name: str, kind: Kind, nodes: Iterable[str], detail: str = "", t_ms: int | None = None) -> Event:
    return Event(FAULT_CLIENT, name, kind, ",".join(nodes), "", "", now_ms() if t_ms is None else t_ms, 0, detail)


class HistoryWriter:
    """Appends events to the history file as they happen (a crash of the run leaves what was
    seen so far), and keeps them in memory for the checkers. Thread-safe: clients' callbacks
    run on consumer threads."""

    def __init__(self, path: Path | None) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._file: TextIO | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115

    def add(self, event: Event) -> Event:
        with self._lock:
            self.events.append(event)
            if self._file is not None:
                self._file.write(event.line())
        return event

    def fault(self, name: str, kind: Kind, nodes: Iterable[str], detail: str = "") -> Event:
        return self.add(fault_event(name, kind, nodes, detail))

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_history(path: Path) -> list[Event]:
    with open(path, encoding="utf-8") as f:
        return list(parse_lines(f))


def parse_lines(lines: Iterable[str]) -> Iterator[Event]:
    for line in lines:
        if line.strip():
            yield Event.parse(line)
