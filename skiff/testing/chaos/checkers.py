"""Checkers over a chaos history (`skiff.testing.chaos.history`), independent of how it was
made: given the lines, each says what went wrong, with OpenChaos's rules.

- `check_queue` (OpenChaos's MQChecker): **lost** = enqueued SUCCESS and never dequeued by
  the group; **duplicated** = dequeues of a value past its first; **recovered** = an
  enqueue that was not SUCCESS but was dequeued anyway (allowed); **unexpected** = a
  dequeued value never enqueued (a bug of the run or of the broker).
- `check_order` (OrderChecker): per sharding key, the SUCCESS enqueues in their order must
  be a subsequence of the group's dequeues in theirs (redeliveries allowed, a gap or a
  swap not).
- `check_rto` (RTOChecker): per fault, the time from the first enqueue answered other than
  SUCCESS after the fault began to the next SUCCESS answer: how long writes were down.
  A fault's window runs to the next fault's start, so a recovery after the fault's end
  still counts.
- `check_latency`: enqueue answer time and end-to-end time (enqueue invoked → first
  dequeue) per group, as percentiles.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from skiff.testing.chaos.history import Event, Kind, Op, Result

SAMPLE = 20
"""Values listed per finding (the counts are complete)."""


def enqueue_responses(events: Iterable[Event]) -> list[Event]:
    return [e for e in events if not e.is_fault and e.op == Op.ENQUEUE and e.kind == Kind.RESPONSE]


def dequeues(events: Iterable[Event], group: str) -> list[Event]:
    return [e for e in events if e.client == group and e.op == Op.DEQUEUE and e.kind == Kind.RESPONSE]


def consumer_groups(events: Iterable[Event]) -> list[str]:
    return sorted({e.client for e in events if not e.is_fault and e.op == Op.DEQUEUE})


@dataclass
class QueueResult:
    group: str
    enqueued: int
    success: int
    failure: int
    unknown: int
    dequeued: int
    lost: int
    duplicated: int
    recovered: int
    unexpected: int
    lost_values: list[str] = field(default_factory=list)
    duplicated_values: list[str] = field(default_factory=list)
    unexpected_values: list[str] = field(default_factory=list)


def check_queue(events: Sequence[Event], group: str) -> QueueResult:
    answers = enqueue_responses(events)
    by_result = Counter(e.result for e in answers)
    acked = [e.value for e in answers if e.result == Result.SUCCESS]
    sent = {e.value for e in answers}
    seen = Counter(e.value for e in dequeues(events, group))
    lost = [v for v in acked if v not in seen]
    dups = sorted(v for v, n in seen.items() if n > 1)
    unexpected = sorted(v for v in seen if v not in sent)
    recovered = {e.value for e in answers if e.result != Result.SUCCESS and e.value in seen}
    return QueueResult(group, len(answers), by_result[Result.SUCCESS], by_result[Result.FAILURE],
                       by_result[Result.UNKNOWN], len(seen), len(lost), sum(n - 1 for n in seen.values()),
                       len(recovered), len(unexpected), lost[:SAMPLE], dups[:SAMPLE], unexpected[:SAMPLE])


@dataclass
class OrderViolation:
    key: str
    first_missing: str
    """The first acknowledged value of the key not found, in order, among the dequeues."""
    acked_before: int
    """How many of the key's acknowledged values matched before it."""


@dataclass
class OrderResult:
    group: str
    keys: int
    violations: list[OrderViolation]


def subsequence_break(acked: Sequence[str], dequeued: Sequence[str]) -> int | None:
    """Index in ``acked`` of the first value not matched in order in ``dequeued``, or None."""
    i = 0
    for value in dequeued:
        if i < len(acked) and acked[i] == value:
            i += 1
    return None if i == len(acked) else i


def check_order(events: Sequence[Event], group: str) -> OrderResult:
    acked: dict[str, list[str]] = defaultdict(list)
    for e in enqueue_responses(events):
        if e.result == Result.SUCCESS:
            acked[e.key].append(e.value)
    got: dict[str, list[str]] = defaultdict(list)
    for e in dequeues(events, group):
        got[e.key].append(e.value)
    violations = []
    for key in sorted(acked):
        at = subsequence_break(acked[key], got[key])
        if at is not None:
            violations.append(OrderViolation(key, acked[key][at], at))
    return OrderResult(group, len(acked), violations)


@dataclass
class FaultRTO:
    name: str
    nodes: str
    start_ms: int
    end_ms: int | None
    """The fault's recovery (its end line); None if the history has none."""
    unavailable: bool
    """Some enqueue was answered other than SUCCESS in the fault's window."""
    rto_ms: int | None
    """First such answer's invoke (or the fault's start, if later) to the next SUCCESS answer;
    0 without unavailability; None if writes never came back."""


def fault_windows(events: Sequence[Event]) -> list[tuple[Event, Event | None, int | None]]:
    """Each fault's start line, its end line, and when its window closes (the next fault's start)."""
    starts = [e for e in events if e.is_fault and e.kind == Kind.START]
    ends = [e for e in events if e.is_fault and e.kind == Kind.END]
    out = []
    for i, start in enumerate(starts):
        end = next((e for e in ends if e.op == start.op and e.t_ms >= start.t_ms), None)
        close = starts[i + 1].t_ms if i + 1 < len(starts) else None
        out.append((start, end, close))
    return out


def rto_of(answers: Sequence[Event], start_ms: int, close_ms: int | None) -> tuple[bool, int | None]:
    down_since: int | None = None
    for e in answers:
        if e.t_ms < start_ms:
            continue
        if down_since is None:
            if close_ms is not None and e.t_ms >= close_ms:
                return False, 0
            if e.result != Result.SUCCESS:
                down_since = max(e.invoked_ms, start_ms)
        elif e.result == Result.SUCCESS and e.invoked_ms >= down_since:
            return True, e.t_ms - down_since
    return (False, 0) if down_since is None else (True, None)


def check_rto(events: Sequence[Event]) -> list[FaultRTO]:
    answers = sorted(enqueue_responses(events), key=lambda e: e.t_ms)
    out = []
    for start, end, close in fault_windows(events):
        unavailable, rto = rto_of(answers, start.t_ms, close)
        out.append(FaultRTO(start.op, start.result, start.t_ms, end.t_ms if end else None, unavailable, rto))
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    return {"count": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99),
            "max": max(values) if values else None}


def check_latency(events: Sequence[Event]) -> dict[str, Any]:
    answers = enqueue_responses(events)
    invoked = {e.value: e.invoked_ms for e in answers if e.result == Result.SUCCESS}
    out: dict[str, Any] = {"enqueue_ms": summary([e.latency_ms for e in answers if e.result == Result.SUCCESS])}
    for group in consumer_groups(events):
        first: dict[str, int] = {}
        for e in dequeues(events, group):
            first.setdefault(e.value, e.t_ms)
        out[f"end_to_end_ms[{group}]"] = summary([t - invoked[v] for v, t in first.items() if v in invoked])
    return out


def rto_by_fault(rtos: Sequence[FaultRTO]) -> dict[str, dict[str, Any]]:
    """Per fault name: how many, how many made writes unavailable, never recovered, RTO p50/p99/max
    (a fault without unavailability counts as 0)."""
    names: dict[str, list[FaultRTO]] = defaultdict(list)
    for r in rtos:
        names[r.name].append(r)
    out = {}
    for name, items in sorted(names.items()):
        values = [r.rto_ms for r in items if r.rto_ms is not None]
        out[name] = {"faults": len(items), "unavailable": sum(r.unavailable for r in items),
                     "not_recovered": sum(r.rto_ms is None for r in items), **summary(values)}
    return out


def by_fault(events: Sequence[Event], ordered_groups: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per fault name, over the windows of its faults (start to the next fault's start): SEND_OK
    messages invoked there, how many of them any group lost, their extra deliveries, the order
    violations whose first missing value is theirs, and the RTO figures (`rto_by_fault`).
    Messages sent before the first fault are under ``(before any fault)``."""
    starts = [e for e in events if e.is_fault and e.kind == Kind.START]
    times = [e.t_ms for e in starts]

    def name_at(t_ms: int) -> str:
        i = bisect.bisect_right(times, t_ms) - 1
        return starts[i].op if i >= 0 else "(before any fault)"
    acked = {e.value: name_at(e.invoked_ms) for e in enqueue_responses(events) if e.result == Result.SUCCESS}
    table: dict[str, dict[str, Any]] = defaultdict(lambda: {"messages": 0, "lost": 0, "duplicated": 0,
                                                           "order_violations": 0})
    for name in acked.values():
        table[name]["messages"] += 1
    lost: set[str] = set()
    for group in consumer_groups(events):
        seen = Counter(e.value for e in dequeues(events, group))
        lost |= {v for v in acked if v not in seen}
        for value, n in seen.items():
            if n > 1 and value in acked:
                table[acked[value]]["duplicated"] += n - 1
    for value in lost:
        table[acked[value]]["lost"] += 1
    for group in ordered_groups:
        for v in check_order(events, group).violations:
            table[acked[v.first_missing]]["order_violations"] += 1
    for name, rto in rto_by_fault(check_rto(events)).items():
        table[name].update(rto)
    return dict(sorted(table.items()))


def client_kind(client: str) -> str:
    """The kind of client that sent, from its name in the history: ``<kind>-p<n>`` for RocketMQ's
    clients (``cpp-p0``, ``rmq5-p3``), ``p<n>`` for ours (``python``)."""
    kind, dash, _ = client.rpartition("-")
    return kind if dash else "python"


def by_client(events: Sequence[Event], ordered_groups: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per kind of sending client: its sends and their outcomes, how many of its SEND_OK values
    any group lost, the order violations on its keys, its send answer times, and its own RTO
    per fault (the `check_rto` rule over its answers only: a client that keeps sending to a
    broker that is no longer master, as RocketMQ's clients do until their next route refresh,
    is down for longer than the others)."""
    answers = enqueue_responses(events)
    kinds = sorted({client_kind(e.client) for e in answers})
    kind_of_key = {e.key: client_kind(e.client) for e in answers}
    acked = {e.value: client_kind(e.client) for e in answers if e.result == Result.SUCCESS}
    lost: set[str] = set()
    for group in consumer_groups(events):
        seen = {e.value for e in dequeues(events, group)}
        lost |= {v for v in acked if v not in seen}
    violations: Counter[str] = Counter()
    for group in ordered_groups:
        violations.update(kind_of_key.get(v.key, "?") for v in check_order(events, group).violations)
    windows = fault_windows(events)
    out = {}
    for kind in kinds:
        mine = sorted((e for e in answers if client_kind(e.client) == kind), key=lambda e: e.t_ms)
        results = Counter(e.result for e in mine)
        rtos = [rto_of(mine, start.t_ms, close)[1] for start, _, close in windows]
        rto = summary([r for r in rtos if r is not None])
        out[kind] = {"sends": len(mine), "success": results[Result.SUCCESS], "failure": results[Result.FAILURE],
                     "unknown": results[Result.UNKNOWN], "lost": sum(1 for v in lost if acked[v] == kind),
                     "order_violations": violations[kind],
                     "enqueue_ms": summary([e.latency_ms for e in mine if e.result == Result.SUCCESS]),
                     "rto_p50": rto["p50"], "rto_p99": rto["p99"],
                     "not_recovered": sum(r is None for r in rtos)}
    return out


@dataclass
class Verdict:
    queue: list[QueueResult]
    order: list[OrderResult]
    rto: list[FaultRTO]
    latency: dict[str, Any]
    faults: dict[str, dict[str, Any]]
    """`by_fault`'s table."""
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`by_client`'s table."""

    @property
    def lost(self) -> int:
        return max((q.lost for q in self.queue), default=0)

    @property
    def order_violations(self) -> int:
        return sum(len(o.violations) for o in self.order)

    @property
    def ok(self) -> bool:
        """Nothing acknowledged lost by any group, no order broken, no unexpected value."""
        return self.lost == 0 and self.order_violations == 0 and all(q.unexpected == 0 for q in self.queue)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "lost": self.lost, "order_violations": self.order_violations,
                "queue": [asdict(q) for q in self.queue], "order": [asdict(o) for o in self.order],
                "by_fault": self.faults, "by_client": self.clients, "rto": [asdict(r) for r in self.rto],
                "latency": self.latency}


def check_all(events: Sequence[Event], ordered_groups: Iterable[str]) -> Verdict:
    """Every checker; order only for ``ordered_groups`` (an orderly consumer's: a concurrent
    consumer promises no order)."""
    groups = consumer_groups(events)
    ordered = [g for g in groups if g in set(ordered_groups)]
    return Verdict([check_queue(events, g) for g in groups], [check_order(events, g) for g in ordered],
                   check_rto(events), check_latency(events), by_fault(events, ordered), by_client(events, ordered))
