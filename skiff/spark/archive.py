"""Topics to Parquet and back: what ``skiff export`` and ``skiff replay`` run, for backfills
and archives.

`export` reads a topic range with the skiff source (offsets or store times) and
writes its rows as Parquet, partitioned by the UTC date each message was stored
(``date=2026-11-24/``); every column of the source is kept. `replay` sends the
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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from skiff.spark.arrow_encode import RESERVED
from skiff.spark.errors import SparkOptionError

DATE_COLUMN = "date"
_US_PER_DAY = 86_400_000_000


def export(spark: SparkSession, namesrv: str, topic: str, path: str, where: Mapping[str, str] | None = None,
           mode: str = "errorifexists") -> int:
    """Write ``topic``'s range (``where``: source options such as ``startingTimestamp``) to Parquet
    under ``path``, partitioned by store date (UTC); the rows the archive holds afterwards (with
    ``mode="append"``, earlier exports' too)."""
    source = spark.read.format("skiff").option("namesrvAddr", namesrv).option("topic", topic) \
        .option("pullBatchSize", "1024").options(**(where or {})).load()
    # the UTC day of the store time, whatever the session's time zone
    dated = source.withColumn(DATE_COLUMN, F.expr(
        f"date_from_unix_date(CAST(floor(unix_micros(store_timestamp) / {_US_PER_DAY}) AS INT))"))
    dated.write.mode(mode).partitionBy(DATE_COLUMN).parquet(path)
    return int(spark.read.parquet(path).count())


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
