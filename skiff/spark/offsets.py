"""Offsets of a skiff read: one logical offset per (topic, broker, queue), and the
arithmetic on them that needs no network.

Spark keeps a stream's progress as the JSON of the dicts a source returns and
compares offsets by that text, so `to_spark` always builds the same text for
the same offsets: ``{"topic": {"broker": {"queueId": offset}}}`` with keys
sorted at every level and int values. Queue ids are JSON keys, hence strings
("10" sorts before "2"; what matters is that the order never changes).

In options, -2 stands for a queue's earliest offset and -1 for its latest,
as in Kafka's startingOffsets.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError

Offsets = dict[MessageQueue, int]
EARLIEST_MARK = -2
LATEST_MARK = -1


class QueueBounds(NamedTuple):
    """The readable logical offsets of a queue now: ``[min_offset, max_offset)``."""

    min_offset: int
    max_offset: int


def to_spark(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, dict[str, int]]]:
    """The canonical nested dict Spark stores and compares (sorted keys at every level)."""
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for mq in sorted(offsets, key=lambda q: (q.topic, q.broker_name, str(q.queue_id))):
        nested.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = int(offsets[mq])
    return nested


def from_spark(nested: Mapping[str, Any], what: str = "offsets") -> Offsets:
    """The offsets of a nested dict as `to_spark` builds it (or as a user writes it in an option)."""
    if not isinstance(nested, Mapping):
        raise SparkOptionError(f"{what}: expected a JSON object like "
                               f'{{"topic": {{"broker": {{"0": 42}}}}}}, got {type(nested).__name__}')
    out: Offsets = {}
    for topic, brokers in nested.items():
        if not isinstance(brokers, Mapping):
            raise SparkOptionError(f"{what}: topic {topic!r} must map broker names to objects of queue offsets")
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                raise SparkOptionError(f"{what}: {topic}/{broker} must map queue ids to offsets")
            for queue_id, offset in queues.items():
                out[MessageQueue(topic, broker, _queue_id(queue_id, what))] = _offset(offset, what, topic, broker)
    return out


def _queue_id(value: Any, what: str) -> int:
    try:
        queue_id = int(value)
    except (TypeError, ValueError):
        raise SparkOptionError(f"{what}: queue id {value!r} is not a whole number") from None
    if queue_id < 0:
        raise SparkOptionError(f"{what}: queue id {queue_id} is negative")
    return queue_id


def _offset(value: Any, what: str, topic: str, broker: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST_MARK:
        raise SparkOptionError(f"{what}: the offset {value!r} of {topic}/{broker} must be a whole number "
                               f">= 0, or -2 (earliest) or -1 (latest)")
    return value


def parse_json_option(text: str, name: str) -> Offsets:
    """The offsets a JSON option names (marks -2 and -1 kept for `resolve`)."""
    try:
        nested = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SparkOptionError(f"option {name} is neither earliest, latest nor JSON: {exc} in {text!r}") from None
    return from_spark(nested, f"option {name}")


def resolve(spec: Mapping[MessageQueue, int], bounds: Mapping[MessageQueue, QueueBounds], name: str,
            default: int) -> Offsets:
    """Concrete offsets for every queue in ``bounds``: those ``spec`` names (marks replaced by the
    queue's bounds), ``default`` (a mark) for the others. A queue ``spec`` names that does not
    exist is an error: its offsets would otherwise be dropped without a word."""
    unknown = sorted(str(mq) for mq in spec if mq not in bounds)
    if unknown:
        raise SparkOptionError(f"option {name} names queues that the topics do not have: {', '.join(unknown)}")
    return {mq: concrete(spec.get(mq, default), b) for mq, b in bounds.items()}


def concrete(offset: int, bounds: QueueBounds) -> int:
    if offset == EARLIEST_MARK:
        return bounds.min_offset
    if offset == LATEST_MARK:
        return bounds.max_offset
    return offset


def rate_limit(start: Mapping[MessageQueue, int], target: Mapping[MessageQueue, int], max_rows: int) -> Offsets:
    """End offsets that admit at most ``max_rows`` messages in all, split over the queues in
    proportion to their backlog (``target - start``).

    Shares are floored and the messages left over go to the queues with the largest
    remainders (ties: queue order), so the total is exactly ``min(max_rows, backlog)``:
    a micro-batch never exceeds the limit, and one with any backlog always moves.
    ``start`` must name every queue of ``target``; no queue ever goes backwards.
    """
    backlog = {mq: max(target[mq] - start[mq], 0) for mq in target}
    total = sum(backlog.values())
    if total > max_rows:
        shares = {mq: n * max_rows / total for mq, n in backlog.items()}
        backlog = {mq: math.floor(s) for mq, s in shares.items()}
        by_remainder = sorted(shares, key=lambda mq: (backlog[mq] - shares[mq], mq))
        for mq in by_remainder[:max_rows - sum(backlog.values())]:
            backlog[mq] += 1
    return {mq: start[mq] + backlog[mq] for mq in target}


class OffsetRange(NamedTuple):
    """``[start, end)`` of one queue: what one Spark task reads."""

    mq: MessageQueue
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int],
                min_partitions: int | None = None, max_records: int | None = None) -> list[OffsetRange]:
    """The non-empty ranges from ``start`` to ``end`` in queue order, split so that there are about
    ``min_partitions`` of them when fewer queues have data (Kafka's rule: each range gets
    parts in proportion to its size, at least one), and so that none holds more than
    ``max_records`` offsets. A range is cut into parts whose sizes differ by one at most."""
    ranges = [OffsetRange(mq, start[mq], end[mq]) for mq in sorted(end) if mq in start and end[mq] > start[mq]]
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(round(r.size / total * min_partitions), 1) if min_partitions and len(ranges) < min_partitions else 1
        if max_records:
            parts = max(parts, -(-r.size // max_records))
        out += _split(r, parts)
    return out


def _split(r: OffsetRange, parts: int) -> Iterable[OffsetRange]:
    parts = min(parts, r.size)
    for i in range(parts):
        lo = r.start + r.size * i // parts
        hi = r.start + r.size * (i + 1) // parts
        yield OffsetRange(r.mq, lo, hi)
