"""The options of ``format("skiff")``, read once into immutable values.

Spark hands options over as a `CaseInsensitiveDict` with lower-cased keys and
string values; everything here reads through that mapping (never ``dict()`` of
it, which would lose the case-insensitive lookup) and turns each value into
its type, or fails with a message that names the option. Names follow Kafka's
source where they mean the same (``startingOffsets``, ``failOnDataLoss``,
``minPartitions``) and RocketMQ's where they are Skiff's (``namesrvAddr``,
``subExpression``, ``pullBatchSize``).

An unknown option is an error: a misspelt ``startingOffset`` silently ignored
would read from the wrong place. Spark's own keys (``path``,
``checkpointLocation``, ``queryName``) are let through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from skiff.common.limits import PULL_MAX_MESSAGES
from skiff.common.names import group_error, topic_error
from skiff.spark.errors import SparkOptionError

SPARK_OWN_OPTIONS = frozenset({"path", "checkpointlocation", "queryname"})
EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_PULL_BATCH_SIZE = PULL_MAX_MESSAGES
"""Messages per pull of a read task: 1024, not RocketMQ's pullBatchSize of 32. A task reads
a known range in bulk, and at 32 per pull it read a third of the Parquet ceiling against
57-72 % at 1024 (`skiff bench spark`, docs/performance.md): the per-pull cost (request,
answer, one Arrow run) was most of it. A broker answers fewer when its caps say so
(maxTransferCountOnMessageInMemory: 1024 on Skiff, 32 on RocketMQ; 1 MiB of records), and
the task pulls on from where the answer ended, so the default reads everything from either."""
DEFAULT_PULL_TIMEOUT_MS = 10_000
"""RocketMQ's consumerPullTimeoutMillis."""
DEFAULT_PRODUCER_GROUP = "SKIFF_SPARK_PRODUCER"
EXPRESSION_TYPES = ("TAG", "SQL92")

SOURCE_OPTIONS = frozenset({
    "namesrvaddr", "topic", "topicpattern", "subexpression", "expressiontype", "startingoffsets",
    "startingtimestamp", "endingoffsets", "endingtimestamp", "maxmessagespertrigger", "minpartitions",
    "failondataloss", "pullbatchsize", "pulltimeoutms", "includeproperties", "consumergroup",
    "maxrecordsperpartition", "tierurl", "tiers3endpoint",
})
SINK_OPTIONS = frozenset({"namesrvaddr", "topic", "producergroup", "idempotent", "writeid"})


class _Reader:
    """Typed reads of one option mapping; every error names the option as the user spelt it in docs."""

    def __init__(self, options: Mapping[str, str], known: frozenset[str], role: str) -> None:
        self._options = options
        unknown = sorted(k for k in options if k.lower() not in known | SPARK_OWN_OPTIONS)
        if unknown:
            raise SparkOptionError(f"unknown option(s) {', '.join(unknown)} for the skiff {role}; "
                                   f"see docs/spark.md for the options it takes")

    def text(self, name: str) -> str | None:
        value = self._options.get(name)
        if value is None:
            return None
        value = str(value).strip()
        return value or None

    def required(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise SparkOptionError(f"option {name} is required (e.g. .option(\"{name}\", ...))")
        return value

    def integer(self, name: str, default: int | None, *, low: int, high: int | None = None) -> int | None:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise SparkOptionError(f"option {name}={value!r} is not a whole number") from None
        if number < low or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise SparkOptionError(f"option {name}={number} must be {bound}")
        return number

    def boolean(self, name: str, default: bool) -> bool:
        value = self.text(name)
        if value is None:
            return default
        if value.lower() not in ("true", "false"):
            raise SparkOptionError(f"option {name}={value!r} must be true or false")
        return value.lower() == "true"

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = (self.text(name) or default).upper()
        if value not in choices:
            raise SparkOptionError(f"option {name}={value!r} must be one of {', '.join(choices)}")
        return value

    def group(self, name: str, default: str | None) -> str | None:
        value = self.text(name) or default
        problem = group_error(value) if value is not None else None
        if problem:
            raise SparkOptionError(f"option {name}: {problem}")
        return value


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a skiff read or readStream was asked for; offsets stay text until the queues are known."""

    namesrv_addr: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    sub_expression: str
    expression_type: str
    starting_offsets: str | None
    starting_timestamp_ms: int | None
    ending_offsets: str | None
    ending_timestamp_ms: int | None
    max_messages_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    pull_batch_size: int
    pull_timeout_ms: int
    include_properties: bool
    consumer_group: str | None
    tier_url: str | None = None
    """file:///dir or s3://bucket/prefix: offsets in the tier are read from it directly (docs/tiered-storage.md)."""
    tier_s3_endpoint: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        r = _Reader(options, SOURCE_OPTIONS, "source")
        topics, pattern = _topic_choice(r)
        starting, starting_ts = r.text("startingOffsets"), r.integer("startingTimestamp", None, low=0)
        if starting is not None and starting_ts is not None:
            raise SparkOptionError("give startingOffsets or startingTimestamp, not both")
        ending, ending_ts = r.text("endingOffsets"), r.integer("endingTimestamp", None, low=0)
        if ending is not None and ending_ts is not None:
            raise SparkOptionError("give endingOffsets or endingTimestamp, not both")
        if ending is not None and ending.lower() == EARLIEST:
            raise SparkOptionError("endingOffsets=earliest would read nothing; use latest or a JSON of offsets")
        return cls(
            namesrv_addr=r.required("namesrvAddr"),
            topics=topics,
            topic_pattern=pattern,
            sub_expression=r.text("subExpression") or "*",
            expression_type=r.choice("expressionType", "TAG", EXPRESSION_TYPES),
            starting_offsets=starting,
            starting_timestamp_ms=starting_ts,
            ending_offsets=ending,
            ending_timestamp_ms=ending_ts,
            max_messages_per_trigger=r.integer("maxMessagesPerTrigger", None, low=1),
            min_partitions=r.integer("minPartitions", None, low=1),
            max_records_per_partition=r.integer("maxRecordsPerPartition", None, low=1),
            fail_on_data_loss=r.boolean("failOnDataLoss", True),
            pull_batch_size=r.integer("pullBatchSize", DEFAULT_PULL_BATCH_SIZE, low=1, high=PULL_MAX_MESSAGES) or 1,
            pull_timeout_ms=r.integer("pullTimeoutMs", DEFAULT_PULL_TIMEOUT_MS, low=1) or 1,
            include_properties=r.boolean("includeProperties", True),
            consumer_group=r.group("consumerGroup", None),
            tier_url=r.text("tierUrl"),
            tier_s3_endpoint=r.text("tierS3Endpoint"),
        )

    def check_streaming(self) -> None:
        """Options that only a batch read can honour are refused by readStream."""
        for name, value in (("endingOffsets", self.ending_offsets), ("endingTimestamp", self.ending_timestamp_ms)):
            if value is not None:
                raise SparkOptionError(f"option {name} is for batch reads (spark.read); a stream has no end")


def _topic_choice(r: _Reader) -> tuple[tuple[str, ...], str | None]:
    listed, pattern = r.text("topic"), r.text("topicPattern")
    if (listed is None) == (pattern is None):
        raise SparkOptionError("give exactly one of the options topic (one topic or a comma list) and "
                               "topicPattern (a regular expression over the topic names)")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SparkOptionError(f"option topicPattern={pattern!r} is not a regular expression: {exc}") from None
        return (), pattern
    topics = tuple(dict.fromkeys(_topic(t.strip()) for t in (listed or "").split(",") if t.strip()))
    return topics, None


def _topic(name: str) -> str:
    problem = topic_error(name)
    if problem:
        raise SparkOptionError(f"option topic: {problem}")
    return name


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """What a skiff write or writeStream was asked for."""

    namesrv_addr: str
    topic: str | None
    producer_group: str
    idempotent: bool
    write_id: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        r = _Reader(options, SINK_OPTIONS, "sink")
        topic = r.text("topic")
        return cls(
            namesrv_addr=r.required("namesrvAddr"),
            topic=_topic(topic) if topic is not None else None,
            producer_group=r.group("producerGroup", DEFAULT_PRODUCER_GROUP) or DEFAULT_PRODUCER_GROUP,
            idempotent=r.boolean("idempotent", False),
            write_id=r.text("writeId"),
        )
