"""Topics to Parquet and back: what ``skiff export`` and ``skiff replay`` run, for backfills
and archives.

`export` reads a topic range with the skiff source (offsets or store times) and
writes its rows as Parquet, partitioned by the UTC date each message was stored
(``date=2026-11-24/``); every column of the source is kept. Given the brokers' tier,
the tiered files that already are such files are copied instead (`skiff.spark.tier_export`). `replay` sends the
rows of such an archive (all of it, or a range of dates) to a topic through the
skiff sink in idempotent mode: each message's id is a hash of the ``writeId``,
the Spark partition and the row's place in it, so running the same replay again
over the same files sends the same ids, and consumers that drop ids they have
seen get every row exactly once.

Properties the sink sets itself (WAIT, UNIQ_KEY, delays; TAGS, KEYS and the
sharding key have columns) are not replayed from the map: a replay delivers now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skiff.spark import tier_export
from skiff.spark.arrow_encode import RESERVED
from skiff.spark.errors import SparkOptionError

DATE_COLUMN = "date"
_US_PER_DAY = 86_400_000_000


@dataclass(frozen=True, slots=True)
class Exported:
    rows: int
    """Rows the archive holds afterwards (with ``mode="append"``, earlier exports' too)."""
    copied_files: int = 0
    copied_rows: int = 0
    """Tiered files copied as they are, and their rows (`skiff.spark.tier_export`)."""


def export(spark: SparkSession, namesrv: str, topic: str, path: str, where: Mapping[str, str] | None = None,
           mode: str = "errorifexists", tier: Mapping[str, str] | None = None) -> Exported:
    """Write ``topic``'s range (``where``: source options such as ``startingTimestamp``) to Parquet
    under ``path``, partitioned by store date (UTC). With ``tier`` (the source's ``tierUrl`` and
    ``tierS3Endpoint`` options) the tiered files that lie wholly in the range and in one day are
    copied as they are, and the rest is read by the source from after them."""
    options = {"namesrvAddr": namesrv, "topic": topic, "pullBatchSize": "1024", **(where or {}), **(tier or {})}
    copies: list[tier_export.TierCopy] = []
    if tier:
        planned = tier_export.plan(options, path)
        copies, options = planned.copies, planned.source_options
    source = spark.read.format("skiff").options(**options).load()
    # the UTC day of the store time, whatever the session's time zone
    dated = source.withColumn(DATE_COLUMN, F.expr(
        f"date_from_unix_date(CAST(floor(unix_micros(store_timestamp) / {_US_PER_DAY}) AS INT))"))
    dated.write.mode(mode).partitionBy(DATE_COLUMN).parquet(path)
    copied = tier_export.copy(options, copies, path) if copies else 0
    return Exported(int(spark.read.parquet(path).count()), len(copies), copied)


def archived(spark: SparkSession, path: str, from_date: str | None = None, to_date: str | None = None) -> DataFrame:
    """The rows of an export at ``path``, those stored from ``from_date`` to ``to_date`` (UTC dates, inclusive)."""
    rows = spark.read.parquet(path)
    if DATE_COLUMN not in rows.columns or "body" not in rows.columns:
        raise SparkOptionError(f"{path} is not a skiff export: it has no {DATE_COLUMN} and body columns")
    if from_date is not None:
        rows = rows.where(F.col(DATE_COLUMN) >= F.lit(from_date).cast("date"))
    if to_date is not None:
        rows = rows.where(F.col(DATE_COLUMN) <= F.lit(to_date).cast("date"))
    return rows


def replay(spark: SparkSession, namesrv: str, path: str, topic: str, write_id: str, from_date: str | None = None,
           to_date: str | None = None) -> int:
    """Send the archived rows to ``topic`` with idempotent ids in ``write_id``'s scope; the rows sent."""
    rows = archived(spark, path, from_date, to_date)
    reserved = ", ".join(f"'{name}'" for name in sorted(RESERVED))
    out = rows.select("body", "tags", "keys",
                      F.expr(f"map_filter(properties, (k, v) -> NOT k IN ({reserved}))").alias("properties"))
    out.write.format("skiff").mode("append").option("namesrvAddr", namesrv).option("topic", topic) \
        .option("idempotent", "true").option("writeId", write_id).save()
    return int(rows.count())
