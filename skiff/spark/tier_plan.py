"""Planning the offsets a read finds in the tier (docs/tiered-storage.md): with ``tierUrl``
set, a queue's bounds start at the tier's first offset, and each planned range is cut at
the tier's end: below it a `TierRange` (the tiered files it spans), read by the executor straight from
the bucket (`skiff.spark.tier_read`); from it a pull range, read through the broker. The cut
is one offset, so no offset is read twice or skipped at the seam.

The tier is used only for reads that filter nothing (``subExpression`` ``*``, TAG): the
broker applies filters, and a filtered read stays on the broker whole. The driver reads the
manifests; the executors read only the files a manifest lists, each checked against its
SHA-256. Credentials for an ``s3://`` tier come from boto3's usual chain on every executor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from skiff.common.message import MessageQueue
from skiff.spark.offsets import QueueBounds
from skiff.spark.options import SourceOptions
from skiff.tier.backends import backend_from_url
from skiff.tier.manifest import Manifest, Segment
from skiff.tier.tier import Tier


@dataclass(frozen=True, slots=True)
class TierRange(InputPartition):
    """One Spark partition read from the tier: offsets ``[start, end)`` of one queue, held by
    the files ``files`` (as the manifest lists them: what an executor fetches and checks), in
    offset order (picklable: names and numbers only)."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    files: tuple[Segment, ...]


def uses_tier(options: SourceOptions) -> bool:
    return bool(options.tier_url) and options.expression_type == "TAG" and options.sub_expression.strip() in ("", "*")


def tier_of(options: SourceOptions) -> Tier:
    return Tier(backend_from_url(options.tier_url or "", endpoint_url=options.tier_s3_endpoint))


def manifests(options: SourceOptions, mqs: Sequence[MessageQueue]) -> dict[tuple[str, str], Manifest]:
    tier = tier_of(options)
    return {(t, b): tier.manifest(t, b) for t, b in sorted({(mq.topic, mq.broker_name) for mq in mqs})}


def lower_bounds(options: SourceOptions, table: dict[MessageQueue, QueueBounds]) -> dict[MessageQueue, QueueBounds]:
    """``table`` with each queue's minimum at the tier's first offset where the tier reaches
    back further than the broker keeps."""
    if not uses_tier(options):
        return table
    found = manifests(options, list(table))
    out = {}
    for mq, b in table.items():
        first = found[(mq.topic, mq.broker_name)].first_offset(mq.queue_id)
        out[mq] = QueueBounds(first, b.max_offset) if first is not None and first < b.min_offset else b
    return out


def split(options: SourceOptions, parts: Sequence[Any]) -> list[InputPartition]:
    """Each pull range (a `QueueRange`) cut at its queue's tier end: a tier range below (every
    file it spans: one Spark partition per planned range, whether it is read from the tier or the
    broker, so ``minPartitions`` and ``maxRecordsPerPartition`` set the parallelism of both; a
    task per file cost the JVM and the Python workers more than they spent per row), the rest
    through the broker."""
    if not uses_tier(options) or not parts:
        return list(parts)
    found = manifests(options, [p.mq for p in parts])
    out: list[InputPartition] = []
    for p in parts:
        m = found[(p.topic, p.broker)]
        first, tier_end = m.first_offset(p.queue_id), m.end_offset(p.queue_id)
        if first is None or not first <= p.start < tier_end:
            out.append(p)
            continue
        cut = min(p.end, tier_end)
        out.append(TierRange(p.topic, p.broker, p.queue_id, p.start, cut, tuple(m.overlapping(p.queue_id, p.start, cut))))
        if cut < p.end:
            out.append(dataclasses.replace(p, start=cut))
    return out
