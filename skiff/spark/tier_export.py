"""``skiff export`` where the tier already has the data: tiered files copied, not re-read.

An export is Parquet partitioned by the UTC date each message was stored (``date=…/``),
with the source's columns (`skiff.spark.archive`). A tiered file whose messages all lie in
the exported range and were all stored on one UTC date already *is* such a file (its first
twelve columns are the source's; the seven after them are what a broker needs to rebuild
records): it is copied byte for byte, checked against its manifest's SHA-256, to
``date=<day>/tier-<broker>-<queue>-<first>-<last>.parquet``. Per queue the copies are the run
of such files from where the export starts; everything after the run (a file that spans
midnight or the range's ends, and the messages not yet tiered) is read by the skiff source
as before, with the tier's URL, so what is still tiered is read from the files by the
executors and only the rest comes through the broker.

The export's directory gets a ``_common_metadata`` file holding the source's schema: Spark
takes a Parquet directory's schema from it, so the copies' extra columns are not read
and the export reads as one with the same rows and columns as an export through the broker.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from skiff.columnar.schema import ARROW_SCHEMA
from skiff.common.message import MessageQueue
from skiff.spark.errors import SparkOptionError
from skiff.spark.offsets import Offsets, to_spark
from skiff.spark.options import SourceOptions
from skiff.spark.source import SkiffBatchReader
from skiff.spark.tier_plan import manifests, tier_of
from skiff.tier.manifest import Segment
from skiff.tier.tier import checked

_RANGE_OPTIONS = ("startingOffsets", "startingTimestamp", "endingOffsets", "endingTimestamp")


@dataclass(frozen=True, slots=True)
class TierCopy:
    """One tiered file an export copies: its queue's broker group, the file, its UTC store date."""

    broker: str
    segment: Segment
    day: str

    def name(self) -> str:
        s = self.segment
        return f"date={self.day}/tier-{self.broker}-{s.queue_id}-{s.first_offset:020d}-{s.last_offset:020d}.parquet"


@dataclass(frozen=True, slots=True)
class ExportPlan:
    copies: list[TierCopy]
    source_options: dict[str, str]
    """The skiff source's options for the rest: each queue from after its copies to the end."""


def utc_day(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).date().isoformat()


def plan(options: Mapping[str, str], path: str) -> ExportPlan:
    """The files to copy into ``path`` and the source read of the rest, for the source ``options``
    (with tierUrl); an output pyarrow cannot write is refused before anything is read."""
    output_fs(path)
    parsed = SourceOptions.parse(options)
    start, end = SkiffBatchReader(parsed).offsets()
    found = manifests(parsed, list(start))
    copies: list[TierCopy] = []
    after: Offsets = {}
    for mq, first in start.items():
        cursor = first
        for seg in found[(mq.topic, mq.broker_name)].queue(mq.queue_id):
            if seg.last_offset < cursor:
                continue
            day = utc_day(seg.first_store_ms)
            if seg.first_offset != cursor or seg.last_offset >= end[mq] or utc_day(seg.last_store_ms) != day:
                break
            copies.append(TierCopy(mq.broker_name, seg, day))
            cursor = seg.last_offset + 1
        after[mq] = cursor
    rest = {k: v for k, v in options.items() if k not in _RANGE_OPTIONS}
    rest["startingOffsets"] = json.dumps(to_spark(after))
    rest["endingOffsets"] = json.dumps(to_spark(_named(end, after)))
    return ExportPlan(copies, rest)


def _named(end: Offsets, start: Mapping[MessageQueue, int]) -> Offsets:
    """``end`` naming every queue ``start`` names (an unnamed queue would read to the latest)."""
    return {mq: end.get(mq, start[mq]) for mq in start}


def output_fs(path: str) -> tuple[pafs.FileSystem, str]:
    """The export directory's filesystem and its path there (a local path, file://, s3://, …)."""
    if "://" not in path:
        return pafs.LocalFileSystem(), os.path.abspath(path)
    try:
        return pafs.FileSystem.from_uri(path)
    except (pa.ArrowException, ValueError) as exc:
        raise SparkOptionError(f"{path}: the tier's files are copied there with pyarrow, which cannot write it "
                               f"({exc}); export with --through-broker") from None


def copy(options: Mapping[str, str], copies: list[TierCopy], path: str) -> int:
    """Copy the files into the export at ``path`` (written by Spark already) and write its
    ``_common_metadata``; the rows copied."""
    tier = tier_of(SourceOptions.parse(options))
    fs, base = output_fs(path)
    for c in copies:
        data = checked(c.segment, tier.backend.get(c.segment.file))
        target = f"{base}/{c.name()}"
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with fs.open_output_stream(target) as out:
            out.write(data)
    if copies:
        pq.write_metadata(ARROW_SCHEMA, f"{base}/_common_metadata", filesystem=fs)
    return sum(c.segment.rows for c in copies)
