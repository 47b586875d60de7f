"""The NameServer's Prometheus metrics (docs/metrics.md): what it knows, read at scrape time.

RocketMQ 5's NameServer exports only ``rocketmq_rpc_latency``; the registry gauges are Skiff's.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from skiff.namesrv.route_table import RouteTable


class NamesrvCollector(Collector):
    def __init__(self, routes: RouteTable) -> None:
        self.routes = routes

    def collect(self) -> Iterator[Metric]:
        brokers = GaugeMetricFamily("skiff_namesrv_live_brokers", "Brokers registered and not expired.",
                                    labels=["node_type"])
        brokers.add_metric(["namesrv"], len(self.routes.live_broker_addrs()))
        topics = GaugeMetricFamily("skiff_namesrv_topics", "Topics with a route.", labels=["node_type"])
        topics.add_metric(["namesrv"], len(self.routes.all_topics().topic_list))
        yield from (brokers, topics)
