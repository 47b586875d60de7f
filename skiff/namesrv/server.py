"""NamesrvServer: the route table behind a remoting server, plus the scan that
drops brokers which stopped registering.

NameServers keep no link to each other: brokers register with every one, so
several run side by side and each holds the same routes on its own.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.service import Periodic
from skiff.namesrv.config import NamesrvConfig
from skiff.namesrv.kv_config import KvConfigStore
from skiff.namesrv.metrics import NamesrvCollector
from skiff.namesrv.processor import NamesrvProcessor
from skiff.namesrv.route_table import RemovedBroker, RouteTable
from skiff.transport.connection import CloseReason, Connection
from skiff.transport.metrics_http import MetricsHttpServer
from skiff.transport.rpc_metrics import RpcLatency
from skiff.transport.server import RemotingServer

log = logging.getLogger(__name__)


class NamesrvServer:
    """One NameServer: `start`, serve until `stop`."""

    def __init__(self, config: NamesrvConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.routes = RouteTable(clock, config.broker_channel_expired_time_ms)
        self.kv = KvConfigStore(config.kv_config_path or None)
        handlers = NamesrvProcessor(self.routes, self.kv).handlers()
        self.metrics: MetricsHttpServer | None = None
        if config.metrics_port:
            registry = CollectorRegistry(auto_describe=False)
            latency = RpcLatency(const_labels={"node_type": "namesrv"})
            handlers = latency.wrap(handlers)
            registry.register(latency)
            registry.register(NamesrvCollector(self.routes))
            self.metrics = MetricsHttpServer(config.listen_host, config.metrics_port, registry)
        self._remoting = RemotingServer(
            config.listen_host,
            config.listen_port,
            handlers,
            on_connection_close=self._connection_closed,
            idle_timeout_s=config.server_channel_max_idle_time_seconds or None,
            tls=config.server_tls(),
        )
        self._scan = Periodic("scan-not-active-brokers", config.scan_not_active_broker_interval_ms / 1000.0,
                              self._scan_tick)

    @property
    def port(self) -> int:
        return self._remoting.port

    async def start(self) -> None:
        """Load the KV configs and listen; `ConfigError` or `ListenError` say what failed."""
        self.kv.load()
        await self._remoting.start()
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except BaseException:
                await self._remoting.stop(0)
                raise
        self._scan.start()

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        await self._scan.stop()
        await self._remoting.stop(drain_timeout_s)

    def scan_brokers(self) -> list[RemovedBroker]:
        """Drop brokers silent past brokerChannelExpiredTime and close their connections."""
        removed = self.routes.expire_brokers()
        for broker in removed:
            log.warning("broker %s (%s) expired: no registration for %d ms", broker.addr, broker.broker_name,
                        self.routes.broker_expired_ms)
            if isinstance(broker.channel, Connection):
                broker.channel.close(CloseReason.LOCAL_CLOSE, "broker registration expired")
        return removed

    def _scan_tick(self) -> None:
        self.scan_brokers()

    def _connection_closed(self, conn: Connection, reason: CloseReason) -> None:
        for broker in self.routes.on_channel_closed(conn):
            log.info("broker %s (%s) removed: its connection closed (%s)", broker.addr, broker.broker_name,
                     reason.value)
