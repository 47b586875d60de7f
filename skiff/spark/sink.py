"""The skiff sink: `SkiffBatchWriter` (``df.write``) and `SkiffStreamWriter` (``df.writeStream``).

Rows are sent from the executors' ``write()``, one Arrow batch at a time,
encoded column-wise into batch bodies (`skiff.spark.arrow_encode`, no message
object per row): the rows bound for one queue (``queue_id`` or ``shardingKey``)
go as batched sends to that queue, in row order; the others go in chunks of
`FREE_CHUNK_ROWS` to whichever queue the producer picks (with its retries on
another broker). Sends of one Arrow batch overlap on the process's client pool,
and stay on the wire while the next batch is encoded (a task waits for one
batch's sends before it sends the next one's).

Delivery is at-least-once: a message is on the broker once ``write()`` has
sent it, before Spark commits anything. If a task fails after sending part of
its rows, or a micro-batch is replayed after a crash, those rows are sent
again. ``commit`` has nothing left to publish and only logs; ``abort`` cannot
take messages back and says so. With ``idempotent=true`` the replayed rows carry
the same msg ids (`skiff.spark.sink_rows.idempotent_ids`), so consumers can
drop the duplicates.

Batch writes append; ``mode("overwrite")`` is refused, since a topic is a log
that cannot be emptied and refilled in one step.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from skiff.client import Admin, SendResult
from skiff.common.limits import BATCH_MAX_MESSAGES
from skiff.common.message import MessageQueue
from skiff.spark import clients
from skiff.spark.arrow_encode import Encoded, Outgoing, by_value, chunks, encode, uniq_ids
from skiff.spark.errors import SparkOptionError
from skiff.spark.options import SinkOptions
from skiff.spark.sink_rows import SinkColumns, idempotent_ids, place

log = logging.getLogger(__name__)

FREE_CHUNK_ROWS = 512
"""Rows that may go to any queue are sent in chunks of this many."""
QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


@dataclass(frozen=True, slots=True)
class SentRows(WriterCommitMessage):
    """What one write task reports to the driver."""

    partition_id: int
    rows: int


def write_partition(options: SinkOptions, columns: SinkColumns, batches: Iterator[pa.RecordBatch],
                    scope: str | None) -> SentRows:
    """Send every row of this task's batches; ``scope`` set means idempotent ids in that scope."""
    context = TaskContext.get()
    partition_id = context.partitionId() if context is not None else 0
    msg_id = idempotent_ids(scope, partition_id) if scope is not None else None
    producer = clients.producer(options.namesrv_addr, options.producer_group)
    sent = 0
    in_flight: list[Future[SendResult]] = []
    for batch in batches:
        n = batch.num_rows
        ids = pa.array([msg_id(sent + i) for i in range(n)], pa.string()) if msg_id is not None else uniq_ids(n)
        sends = _sends(options, columns, batch, encode(batch, columns, options.topic, ids, sent))
        _settle(in_flight)  # the previous batch's sends were on the wire while this one was encoded
        in_flight = [clients.pool().submit(producer.send_encoded_batch, s.topic, s.body, s.msg_ids, queue=s.queue)
                     for s in sends]
        sent += n
    _settle(in_flight)
    return SentRows(partition_id, sent)


def _settle(sends: list[Future[SendResult]]) -> None:
    """Wait for every one of ``sends``; the first failure is raised once all have ended."""
    wait(sends)
    for send in sends:
        send.result()


def _sends(options: SinkOptions, columns: SinkColumns, batch: pa.RecordBatch, encoded: Encoded) -> list[Outgoing]:
    """The requests of one encoded batch: per topic, one run of sends per pinned queue, in row
    order, and the rows that may go anywhere in chunks of `FREE_CHUNK_ROWS`."""
    n = batch.num_rows
    if "topic" in columns.names:
        topics = by_value(encoded.topics.to_pylist())
    else:
        topics = {options.topic: np.arange(n, dtype=np.int64)}
    pinned = "queue_id" in columns.names or "shardingkey" in columns.names
    values = {key: batch.column(columns.names[key]).to_pylist() if key in columns.names else [None] * n
              for key in ("broker", "queue_id", "shardingkey")} if pinned else {}
    out: list[Outgoing] = []
    for topic, rows in topics.items():
        assert isinstance(topic, str)
        if not pinned:
            out += chunks(encoded, rows, topic, None, FREE_CHUNK_ROWS)
            continue
        queues = _writable_queues(topic, clients.admin(options.namesrv_addr))
        places = by_value([(values["broker"][r], values["queue_id"][r], values["shardingkey"][r]) for r in rows])
        for (broker, queue_id, key), where in places.items():
            mq = place(topic, broker, queue_id, key, queues)
            out += chunks(encoded, rows[where], topic, mq, FREE_CHUNK_ROWS if mq is None else BATCH_MAX_MESSAGES)
    return out


def _writable_queues(topic: str, admin: Admin) -> tuple[MessageQueue, ...]:
    """The queues a producer sends ``topic`` to, in the order its selectors see them."""
    queues = admin.writable_queues(topic)
    if not queues:
        raise SparkOptionError(f"topic {topic} has no writable queue on a broker with a master")
    return queues


def _report(kind: str, messages: Sequence[WriterCommitMessage | None], batch_id: int | None = None) -> None:
    rows = sum(m.rows for m in messages if isinstance(m, SentRows))
    failed = sum(1 for m in messages if m is None)
    where = f"micro-batch {batch_id}" if batch_id is not None else "write"
    if kind == "commit":
        log.info("skiff sink %s: %d rows sent by %d tasks", where, rows, len(messages))
    else:
        log.warning("skiff sink %s aborted: %d tasks failed; %d rows of the others are already on the brokers "
                    "and stay there (at-least-once)", where, failed, rows)


class SkiffBatchWriter(DataSourceArrowWriter):
    """``df.write.format("skiff").mode("append")``."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        if options.idempotent and options.write_id is None:
            raise SparkOptionError("idempotent=true on a batch write needs a writeId option naming this write "
                                   "(the same on a re-run, so the re-run sends the same msg ids)")
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRows:
        scope = f"write/{self.options.write_id}" if self.options.idempotent else None
        return write_partition(self.options, self.columns, iterator, scope)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _report("commit", messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _report("abort", messages)


class SkiffStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("skiff")``: each micro-batch's rows are sent as it runs."""

    def __init__(self, options: SinkOptions, columns: SinkColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentRows:
        scope = None
        if self.options.idempotent:
            context = TaskContext.get()
            assert context is not None, "write() runs in a Spark task"
            scope = f"stream/{context.getLocalProperty(QUERY_ID)}/{context.getLocalProperty(BATCH_ID)}"
        return write_partition(self.options, self.columns, iterator, scope)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _report("commit", messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _report("abort", messages, batchId)
