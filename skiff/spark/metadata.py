"""Driver-side questions about the topics a read covers: which queues, their bounds now,
offsets by time, and where a read starts and ends.

Readable queues come from the NameServer's route (a broker's read queue count);
bounds come from each broker's topic stats, with a direct question for a
readable queue the stats do not list (a topic with more read than write
queues). Questions about several topics or queues overlap on the process's
client pool.
"""

from __future__ import annotations

import logging
import re

from skiff.client import Admin
from skiff.client.errors import NoRouteError
from skiff.common.message import MessageQueue
from skiff.spark import clients, tier_plan
from skiff.spark.errors import DataLossError, SparkOptionError
from skiff.spark.offsets import (
    EARLIEST_MARK,
    LATEST_MARK,
    Offsets,
    QueueBounds,
    concrete,
    parse_json_option,
    resolve,
)
from skiff.spark.options import EARLIEST, LATEST, SourceOptions

log = logging.getLogger(__name__)

Bounds = dict[MessageQueue, QueueBounds]


def topics(options: SourceOptions) -> list[str]:
    """The listed topics, or those whose whole name matches ``topicPattern`` now."""
    if options.topic_pattern is None:
        return list(options.topics)
    pattern = re.compile(options.topic_pattern)
    return sorted(t for t in clients.admin(options.namesrv_addr).topic_list() if pattern.fullmatch(t))


def bounds(options: SourceOptions, names: list[str] | None = None) -> Bounds:
    """``[min, max)`` of every readable queue of the topics (fresh from the brokers)."""
    names = topics(options) if names is None else names
    tables = clients.pool().map(lambda t: _topic_bounds(options.namesrv_addr, t), names)
    return tier_plan.lower_bounds(options, {mq: b for table in tables for mq, b in table.items()})


def _topic_bounds(namesrv_addr: str, topic: str) -> Bounds:
    admin = clients.admin(namesrv_addr)
    try:
        readable = clients.run(clients.pull_client(namesrv_addr).fetch_subscribe_queues(topic))
        status = admin.topic_status(topic)
    except NoRouteError:
        raise SparkOptionError(f"topic {topic!r} does not exist: the NameServer at {namesrv_addr} has no "
                               f"route for it (create it with `skiff topic create`)") from None
    stats = {row.mq: QueueBounds(row.min_offset, row.max_offset) for row in status}
    for mq in readable:
        if mq not in stats:
            stats[mq] = _ask_bounds(admin, mq)
    return {mq: stats[mq] for mq in sorted(readable)}


def compacted_topics(options: SourceOptions, names: list[str]) -> set[str]:
    """The topics whose cleanup.policy is COMPACTION on some broker (a broker that cannot
    say, such as a RocketMQ broker, counts as not compacted)."""
    admin = clients.admin(options.namesrv_addr)

    def compacted(topic: str) -> bool:
        return any(b.state is not None and b.state.cleanup_policy == "COMPACTION"
                   for b in admin.compaction(topic, timeout_ms=options.pull_timeout_ms))

    return {t for t, yes in zip(names, clients.pool().map(compacted, names)) if yes}


def _ask_bounds(admin: Admin, mq: MessageQueue) -> QueueBounds:
    return QueueBounds(admin.min_offset(mq), admin.max_offset(mq))


def offsets_at(options: SourceOptions, queues: list[MessageQueue], timestamp_ms: int) -> Offsets:
    """Per queue, the offset of the first message stored at or after ``timestamp_ms``."""
    admin = clients.admin(options.namesrv_addr)
    return dict(zip(queues, clients.pool().map(lambda mq: admin.search_offset(mq, timestamp_ms), queues)))


def starting_offsets(options: SourceOptions, table: Bounds, default: str) -> Offsets:
    """Where a read starts on every queue of ``table``: startingTimestamp, startingOffsets, or ``default``."""
    if options.starting_timestamp_ms is not None:
        return offsets_at(options, list(table), options.starting_timestamp_ms)
    return _offsets_option(options.starting_offsets or default, "startingOffsets", table, EARLIEST_MARK)


def ending_offsets(options: SourceOptions, table: Bounds) -> Offsets:
    """Where a batch read ends on every queue: endingTimestamp, endingOffsets or the latest."""
    if options.ending_timestamp_ms is not None:
        return offsets_at(options, list(table), options.ending_timestamp_ms)
    return _offsets_option(options.ending_offsets or LATEST, "endingOffsets", table, LATEST_MARK)


def _offsets_option(text: str, name: str, table: Bounds, unnamed: int) -> Offsets:
    """The offsets an option gives every queue; a JSON that does not name a queue gives it ``unnamed``."""
    word = text.lower()
    if word in (EARLIEST, LATEST):
        mark = EARLIEST_MARK if word == EARLIEST else LATEST_MARK
        return {mq: concrete(mark, b) for mq, b in table.items()}
    return resolve(parse_json_option(text, name), table, name, unnamed)


def check_data_loss(options: SourceOptions, start: Offsets, table: Bounds) -> Offsets:
    """``start`` with every queue whose messages retention removed moved to its new minimum,
    or `DataLossError` naming them when ``failOnDataLoss`` (the default)."""
    lost = {mq: table[mq].min_offset for mq, offset in start.items() if mq in table and offset < table[mq].min_offset}
    if not lost:
        return dict(start)
    if options.fail_on_data_loss:
        raise DataLossError(data_loss_message([(mq, start[mq], low) for mq, low in lost.items()]))
    for mq, low in lost.items():
        log.warning("skipping offsets %d..%d of %s: retention removed them (failOnDataLoss=false)",
                    start[mq], low - 1, mq)
    return {**start, **lost}


def data_loss_message(lost: list[tuple[MessageQueue, int, int]]) -> str:
    """The error text for queues whose needed offsets are gone: (queue, needed from, earliest now)."""
    parts = [f"topic {mq.topic}, broker {mq.broker_name}, queue {mq.queue_id}: the query needs offset {need} "
             f"but the earliest offset left is {low} ({low - need} messages removed)" for mq, need, low in lost]
    return ("retention removed messages the query still needed; " + "; ".join(parts) +
            ". Set failOnDataLoss=false to skip them and go on.")


def commit_group_offsets(options: SourceOptions, offsets: Offsets) -> None:
    """Record ``offsets`` as ``consumerGroup``'s offsets on the brokers (so lag shows in
    `skiff consumer progress`); a failure is logged, never fatal: Spark's checkpoint is the truth."""
    group = options.consumer_group
    if group is None or not offsets:
        return
    admin = clients.admin(options.namesrv_addr)
    try:
        list(clients.pool().map(lambda item: admin.update_consumer_offset(group, *item), offsets.items()))
    except Exception as exc:  # noqa: BLE001 - progress reporting must not fail the query
        log.warning("could not commit offsets of group %s: %s", group, exc)
