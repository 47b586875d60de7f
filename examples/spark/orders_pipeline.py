"""Order events from Skiff -> per-minute order counts and revenue by status -> Parquet and a result topic.

    skiff up &                                             # NameServer + broker on 127.0.0.1
    python examples/spark/orders_producer.py --count 20000  # some order events
    python examples/spark/orders_pipeline.py               # one run over what is there (availableNow)
    python examples/spark/orders_pipeline.py --processing-time "10 seconds"   # or keep running

A Structured Streaming job of the kind a data team runs: read the ``Orders``
topic with the skiff source, parse the JSON bodies, count orders and sum their
amounts per one-minute event-time window and status, with a watermark of two
minutes so late events still count and a window is written once, when the
watermark passes its end. Each finished window goes to Parquet (``--output``,
one directory per micro-batch) and, as a JSON message tagged with the status,
to the ``OrderStats`` topic.

Both writes are idempotent per micro-batch, so a micro-batch replayed after a
crash changes nothing: the Parquet directory of the batch is overwritten, and
the messages get the same msg ids (skiff sink ``idempotent=true`` with a
``writeId`` of the query and batch), which consumers drop when seen before.
The checkpoint (``--checkpoint``) holds the offsets; run the job again and it
goes on where it stopped. Both default to directories under ``build/orders-pipeline/``
(ignored by git), relative to where you run it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

ORDER_SCHEMA = "order_id STRING, customer STRING, status STRING, amount DECIMAL(10,2), event_time TIMESTAMP"
WINDOW = "1 minute"
WATERMARK = "2 minutes"


@dataclass(frozen=True)
class Job:
    namesrv: str
    topic: str = "Orders"
    result_topic: str = "OrderStats"
    output: str = "build/orders-pipeline/out"
    checkpoint: str = "build/orders-pipeline/checkpoint"
    max_messages_per_trigger: int = 50_000


def order_stats(events: DataFrame) -> DataFrame:
    """Orders and revenue per minute and status, from the skiff source's rows."""
    orders = events.select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*")
    stats = orders.where(F.col("event_time").isNotNull()) \
        .withWatermark("event_time", WATERMARK) \
        .groupBy(F.window("event_time", WINDOW), "status") \
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("revenue"))
    return stats.select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                        "status", "orders", "revenue")


def as_messages(stats: DataFrame) -> DataFrame:
    """One JSON message per window and status; tagged with the status, keyed by the window start."""
    body = F.to_json(F.struct("window_start", "window_end", "status", "orders", "revenue"),
                     {"timeZone": "UTC", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss'Z'"})
    key = F.date_format(F.col("window_start"), "yyyyMMddHHmm")
    return stats.select(body.alias("body"), F.col("status").alias("tags"), key.alias("keys"))


def start(spark: SparkSession, job: Job, trigger: dict[str, Any]) -> StreamingQuery:
    events = spark.readStream.format("skiff").option("namesrvAddr", job.namesrv).option("topic", job.topic) \
        .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", str(job.max_messages_per_trigger)) \
        .load()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        batch.write.mode("overwrite").parquet(f"{job.output}/batch_id={batch_id}")
        as_messages(batch).write.format("skiff").mode("append").option("namesrvAddr", job.namesrv) \
            .option("topic", job.result_topic).option("idempotent", "true") \
            .option("writeId", f"{job.checkpoint}/{batch_id}").save()
        batch.unpersist()

    return order_stats(events).writeStream.outputMode("append").foreachBatch(write_batch) \
        .option("checkpointLocation", job.checkpoint).trigger(**trigger).start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876", help="NameServer address (default 127.0.0.1:9876)")
    parser.add_argument("--topic", default=Job.topic)
    parser.add_argument("--result-topic", default=Job.result_topic)
    parser.add_argument("--output", default=Job.output, help="Parquet directory of the windows")
    parser.add_argument("--checkpoint", default=Job.checkpoint)
    parser.add_argument("--processing-time", help='keep running, a micro-batch every interval ("10 seconds"); '
                                                  "default: one availableNow run")
    args = parser.parse_args(argv)
    from skiff.client import Admin
    from skiff.spark.local import local_session

    with Admin(args.namesrv) as admin:
        if args.result_topic not in admin.topic_list():
            admin.create_topic(args.result_topic, queue_nums=4)
    spark = local_session("orders-pipeline")
    job = Job(args.namesrv, args.topic, args.result_topic, args.output, args.checkpoint)
    trigger = {"processingTime": args.processing_time} if args.processing_time else {"availableNow": True}
    query = start(spark, job, trigger)
    query.awaitTermination()
    written = spark.read.parquet(job.output).count() if Path(job.output).exists() else 0
    print(f"{written} windows in {job.output} (and as messages in {job.result_topic})")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
