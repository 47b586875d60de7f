"""What the Spark tests share: topics, sends, query runs and reading the output back."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skiff.client import Admin, Message, MessageExt, MessageQueue, Producer, PullClient, PullStatus, SendResult

QUERY_TIMEOUT_S = 120
_names = itertools.count()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def create_topic(namesrv: str, prefix: str, queues: int = 2, broker_addr: str | None = None) -> str:
    topic = topic_name(prefix)
    with Admin(namesrv) as admin:
        admin.create_topic(topic, queue_nums=queues, broker_addr=broker_addr)
    return topic


def send(namesrv: str, messages: list[Message], queue: MessageQueue | None = None) -> list[SendResult]:
    with Producer("spark-test-producer", namesrv) as producer:
        return [producer.send(m, queue=queue) for m in messages]


def pull_all(namesrv: str, topic: str) -> list[tuple[MessageQueue, MessageExt]]:
    """Every message of ``topic`` now with its queue, read with Skiff's own pull client."""
    out: list[tuple[MessageQueue, MessageExt]] = []
    with PullClient(namesrv) as client:
        for mq in client.fetch_subscribe_queues(topic):
            offset = 0
            while True:
                result = client.pull(mq, offset, 64)
                if result.status is PullStatus.NO_NEW_MSG:
                    break
                out.extend((mq, m) for m in result.messages)
                offset = result.next_begin_offset
    return out


def reader(spark: Any, namesrv: str, topic: str | None, stream: bool = False, **options: str) -> Any:
    source = spark.readStream if stream else spark.read
    options = {"namesrvAddr": namesrv, "topic": topic, **options}
    return source.format("skiff").options(**{k: v for k, v in options.items() if v is not None}).load()


def run_to_parquet(df: Any, out: Path, trigger: dict[str, Any] | None = None) -> Any:
    """Start ``df`` into Parquet under ``out`` (checkpoint beside it) and return the query."""
    writer = df.writeStream.format("parquet").option("path", str(out / "data")) \
        .option("checkpointLocation", str(out / "checkpoint"))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def finish(query: Any) -> list[int]:
    """Wait for an availableNow query to end; the input rows of each micro-batch with data."""
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"the query did not end within {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()
    return batch_sizes(query)


def batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def parquet_rows(spark: Any, out: Path) -> list[Any]:
    return spark.read.parquet(str(out / "data")).collect()


@contextlib.contextmanager
def spark_quiet(spark: Any) -> Iterator[None]:
    """Spark's log off around a query that is meant to fail (its stack traces are noise)."""
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        spark.sparkContext.setLogLevel("ERROR")
