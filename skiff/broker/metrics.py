"""The broker's Prometheus metrics (docs/metrics.md), collected at scrape time.

Nothing here runs on the request path: sends and pulls bump `BrokerStats`
counters once per request, and `BrokerCollector.collect` turns those, the
committed offsets, the clients, the store and the timer into metric families when
Prometheus asks. Consumer lag is computed then, from each committed offset and its
queue's max offset, so it costs nothing between scrapes.

Names are RocketMQ 5's (BrokerMetricsConstant, DefaultStoreMetricsConstant) where it
has one, ``skiff_`` otherwise. Every sample carries ``cluster``, ``node_type`` and
``node_id`` (the broker name), as RocketMQ's do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from skiff.broker.transactions.results import Outcome
from skiff.common.names import DLQ_PREFIX, SYSTEM_TOPICS, is_retry_topic

if TYPE_CHECKING:
    from skiff.broker.server import BrokerServer

ConstLabels = tuple[list[str], list[str]]
STORAGE_SIZE_REFRESH_S = 10.0
"""rocketmq_storage_size walks the store directory (one stat per file: thousands with many queues),
so a scrape re-walks it at most this often and reports the last walk otherwise."""


class BrokerCollector(Collector):
    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        cfg = broker.config
        self._const: ConstLabels = (["cluster", "node_type", "node_id"],
                                    [cfg.broker_cluster_name, "broker", cfg.broker_name])
        self._disk: tuple[float, int] | None = None
        """(monotonic time of the last walk, bytes)."""

    def collect(self) -> Iterator[Metric]:
        for part in (self._traffic, self._consumers, self._clients, self._storage, self._timer, self._transactions,
                     self._broker, self._tier):
            yield from part()

    def _tier(self) -> Iterator[Metric]:
        """Tiered storage's rows (docs/tiered-storage.md), when the broker has a tier."""
        tier = self.broker.tier
        for row in [] if tier is None else tier.metrics():
            family = self._family(CounterMetricFamily if row.counter else GaugeMetricFamily, row.name, row.doc,
                                  list(row.labels))
            for values, value in row.rows:
                self._add(family, list(values), value)
            yield family

    # ------------------------------------------------------------------ helpers

    def _family(self, kind: Callable[..., Metric], name: str, doc: str, labels: list[str]) -> Metric:
        return kind(name, doc, labels=[*labels, *self._const[0]])

    def _add(self, family: Metric, values: list[str], value: float) -> None:
        family.add_metric([*values, *self._const[1]], value)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ parts

    def _traffic(self) -> Iterator[Metric]:
        stats = self.broker.stats
        msgs_in = self._family(CounterMetricFamily, "rocketmq_messages_in", "Messages stored from sends.",
                               ["topic", "is_retry", "is_system"])
        bytes_in = self._family(CounterMetricFamily, "rocketmq_throughput_in", "Request body bytes of stored sends.",
                                ["topic", "is_retry", "is_system"])
        dlq = self._family(CounterMetricFamily, "rocketmq_send_to_dlq_messages",
                           "Messages moved to a group's dead-letter topic.", ["consumer_group"])
        for topic, (messages, size) in sorted(stats.in_by_topic.items()):
            flags = [topic, _flag(is_retry_topic(topic)), _flag(topic in SYSTEM_TOPICS)]
            self._add(msgs_in, flags, messages)
            self._add(bytes_in, flags, size)
            if topic.startswith(DLQ_PREFIX):
                self._add(dlq, [topic[len(DLQ_PREFIX):]], messages)
        msgs_out = self._family(CounterMetricFamily, "rocketmq_messages_out", "Messages answered to pulls.",
                                ["topic", "consumer_group", "is_retry"])
        bytes_out = self._family(CounterMetricFamily, "rocketmq_throughput_out", "Bytes answered to pulls.",
                                 ["topic", "consumer_group", "is_retry"])
        by_topic_group: dict[tuple[str, str], list[int]] = {}
        for (group, topic, _queue), (messages, size, _next) in stats.pulls.items():
            sums = by_topic_group.setdefault((topic, group), [0, 0])
            sums[0] += messages
            sums[1] += size
        for (topic, group), (messages, size) in sorted(by_topic_group.items()):
            self._add(msgs_out, [topic, group, _flag(is_retry_topic(topic))], messages)
            self._add(bytes_out, [topic, group, _flag(is_retry_topic(topic))], size)
        yield from (msgs_in, bytes_in, msgs_out, bytes_out, dlq)

    def _consumers(self) -> Iterator[Metric]:
        labels = ["topic", "consumer_group", "queue_id"]
        lag = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_messages",
                           "Messages stored but not yet committed by the group (max offset - committed).", labels)
        inflight = self._family(GaugeMetricFamily, "rocketmq_consumer_inflight_messages",
                                "Messages pulled but not yet committed (last pull's next offset - committed).", labels)
        ready = self._family(GaugeMetricFamily, "rocketmq_consumer_ready_messages",
                             "Messages stored and not yet pulled (max offset - last pull's next offset).", labels)
        latency = self._family(GaugeMetricFamily, "rocketmq_consumer_lag_latency",
                               "Age of the oldest message not yet committed by the group (ms; 0 without lag).",
                               labels)
        store, pulls, now_ms = self.broker.store, self.broker.stats.pulls, self.broker.clock.now_ms()
        committed_at = {(g, t, q): c for g, t, q, c in self.broker.offsets.entries()}
        for g, t, q, c in self.broker.pop.consumed():  # a POP group's queue before its first ack too
            committed_at.setdefault((g, t, q), c)
        for (group, topic, queue_id), committed in sorted(committed_at.items()):
            max_offset = store.get_max_offset(topic, queue_id)
            values = [topic, group, str(queue_id)]
            popped = self.broker.pop.progress(group, topic, queue_id)
            if popped is not None:  # a POP group: not yet popped, plus popped and not acknowledged
                cursor, in_flight = popped
                self._add(lag, values, max(0, max_offset - cursor) + in_flight)
                self._add(inflight, values, in_flight)
                self._add(ready, values, max(0, max_offset - cursor))
            else:
                self._add(lag, values, max(0, max_offset - committed))
            stored_ms = store.get_store_time(topic, queue_id, committed) if committed < max_offset else None
            self._add(latency, values, max(0, now_ms - stored_ms) if stored_ms is not None else 0)
            pulled = pulls.get((group, topic, queue_id))
            if pulled is not None and popped is None:
                reached = pulled[2]
                self._add(inflight, values, max(0, reached - committed))
                self._add(ready, values, max(0, max_offset - reached))
        yield from (lag, latency, inflight, ready)

    def _clients(self) -> Iterator[Metric]:
        clients = self.broker.clients
        producers = self._family(GaugeMetricFamily, "rocketmq_producer_connections",
                                 "Producer connections by group.", ["producer_group"])
        for group, channels in sorted(clients.producers.items()):
            self._add(producers, [group], len(channels))
        consumers = self._family(GaugeMetricFamily, "rocketmq_consumer_connections",
                                 "Consumer connections by group.", ["consumer_group"])
        for group, info in sorted(clients.consumers.items()):
            self._add(consumers, [group], len(info.channels))
        yield from (producers, consumers)

    def _storage(self) -> Iterator[Metric]:
        s = self.broker.store.stats()
        size = self._family(GaugeMetricFamily, "rocketmq_storage_size",
                            "Bytes the store's files take on disk (allocated blocks).", [])
        self._add(size, [], self._storage_bytes())
        flush = self._family(GaugeMetricFamily, "rocketmq_storage_flush_behind_bytes",
                             "CommitLog bytes written but not yet flushed.", [])
        self._add(flush, [], s.max_physical_offset - s.flushed_offset)
        dispatch = self._family(GaugeMetricFamily, "rocketmq_storage_dispatch_behind_bytes",
                                "CommitLog bytes not yet indexed in ConsumeQueues.", [])
        self._add(dispatch, [], s.max_physical_offset - s.dispatched_offset)
        yield from (size, flush, dispatch)

    def _storage_bytes(self) -> int:
        now = self.broker.clock.monotonic()
        if self._disk is None or now - self._disk[0] >= STORAGE_SIZE_REFRESH_S:
            self._disk = (now, _disk_bytes(self.broker.store_config.root))
        return self._disk[1]

    def _timer(self) -> Iterator[Metric]:
        timer = self.broker.timer
        if timer is None:
            return
        t = timer.stats()
        gauges = (("rocketmq_timing_messages", "Delayed messages waiting in the timer.", t.scheduled),
                  ("rocketmq_timer_enqueue_lag", "Scheduled entries not yet replayed into the timer.", t.replay_lag))
        for name, doc, value in gauges:
            family = self._family(GaugeMetricFamily, name, doc, [])
            self._add(family, [], value)
            yield family
        dequeued = self._family(CounterMetricFamily, "rocketmq_timer_dequeue", "Delayed messages delivered.", [])
        self._add(dequeued, [], t.delivered)
        late = self._family(GaugeMetricFamily, "skiff_timer_lateness_ms",
                            "Delivery time minus due time over the last deliveries (ms).", ["quantile"])
        for q, ms in (("0.5", t.lateness_p50_ms), ("0.99", t.lateness_p99_ms), ("1", t.lateness_max_ms)):
            self._add(late, [q], ms)
        yield from (dequeued, late)

    def _transactions(self) -> Iterator[Metric]:
        tx = self.broker.transactions
        tx.catch_up()  # the table learns of half messages lazily; count the ones stored so far
        half = self._family(GaugeMetricFamily, "rocketmq_half_messages", "Transactions not yet committed or "
                            "rolled back (half messages open).", [])
        self._add(half, [], len(tx.table.open))
        commits = self._family(CounterMetricFamily, "rocketmq_commit_messages", "Transactions committed.", ["topic"])
        rollbacks = self._family(CounterMetricFamily, "rocketmq_rollback_messages", "Transactions rolled back.",
                                 ["topic"])
        for (topic, outcome), count in sorted(tx.ended.items(), key=lambda kv: (kv[0][0], kv[0][1].value)):
            self._add(commits if outcome is Outcome.COMMITTED else rollbacks, [topic], count)
        yield from (half, commits, rollbacks)

    def _broker(self) -> Iterator[Metric]:
        perm = self._family(GaugeMetricFamily, "rocketmq_broker_permission", "Perm bits: 2 write, 4 read.", [])
        self._add(perm, [], self.broker.config.broker_permission)
        yield perm
        acl = self.broker.acl
        if acl is not None:
            refused = self._family(CounterMetricFamily, "skiff_acl_refused_requests",
                                   "Requests refused by the ACL (NO_PERMISSION).", [])
            self._add(refused, [], acl.refused)
            yield refused


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _disk_bytes(root: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total
