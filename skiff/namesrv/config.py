"""NamesrvConfig: RocketMQ's NameServer keys, from ``namesrv.conf`` and the command line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from skiff.common.errors import ConfigError
from skiff.transport.tls import TlsSettings


@dataclass(frozen=True, slots=True)
class NamesrvConfig(TlsSettings):
    """A NameServer's settings; keys are RocketMQ's camelCase names (and its ``tls.*`` keys).

    The two broker-expiry intervals take RocketMQ's key names (which carry no
    unit) and are milliseconds.
    """

    ALIASES: ClassVar[dict[str, str]] = {
        **TlsSettings.TLS_KEYS,
        "scanNotActiveBrokerInterval": "scan_not_active_broker_interval_ms",
        "brokerChannelExpiredTime": "broker_channel_expired_time_ms",
    }

    listen_host: str = "0.0.0.0"
    listen_port: int = 9876
    scan_not_active_broker_interval_ms: int = 10_000
    """How often brokers that stopped registering are looked for."""
    broker_channel_expired_time_ms: int = 120_000
    """A broker silent this long is dropped with its queues."""
    server_channel_max_idle_time_seconds: int = 120
    """Connections with no traffic this long are closed (0 keeps them)."""
    kv_config_path: str = ""
    """Where KV configs (ORDER_TOPIC_CONFIG, ...) persist; empty keeps them in memory."""
    metrics_port: int = 0
    """Serve Prometheus metrics at http://listenHost:metricsPort/metrics; 0 is off (docs/metrics.md)."""

    def validate(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError(f"listenPort: {self.listen_port} is not a port (0-65535)")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"metricsPort: {self.metrics_port} is not a port (0-65535; 0 is off)")
        if self.scan_not_active_broker_interval_ms <= 0:
            raise ConfigError("scanNotActiveBrokerInterval: must be more than 0 ms")
        if self.broker_channel_expired_time_ms <= 0:
            raise ConfigError("brokerChannelExpiredTime: must be more than 0 ms")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ConfigError("serverChannelMaxIdleTimeSeconds: must be 0 (never) or more")
        self.validate_tls()
