"""ClientConfig: what every producer, consumer and admin of a process shares.

The names are RocketMQ's ClientConfig keys in snake_case (``namesrvAddr`` is
``namesrv_addr``), so `skiff.common.config.build_config` reads them from
properties files or command lines. Intervals are milliseconds, as in RocketMQ.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from skiff.client.credentials import Credentials
from skiff.client.errors import ClientConfigError
from skiff.transport.tls import TlsClientConfig

DEFAULT_INSTANCE_NAME = "DEFAULT"
NAMESRV_ENV_VARS = ("SKIFF_NAMESRV", "NAMESRV_ADDR")
"""Environment variables read, in order, when no NameServer address is given."""


def local_ip() -> str:
    """This host's first non-loopback IPv4 address, else 127.0.0.1 (what Java's
    RemotingUtil.getLocalAddress prefers: the address brokers see a client from)."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return "127.0.0.1"
    addrs = [str(info[4][0]) for info in infos]
    return next((a for a in addrs if not a.startswith("127.")), addrs[0] if addrs else "127.0.0.1")


def namesrv_from_env() -> str:
    """The NameServer list from ``$SKIFF_NAMESRV`` or ``$NAMESRV_ADDR`` ("" if neither is set)."""
    return next((os.environ[v] for v in NAMESRV_ENV_VARS if os.environ.get(v)), "")


def split_namesrv_addr(addr: str) -> tuple[str, ...]:
    """``"a:9876;b:9876"`` as a tuple of addresses; blanks dropped, order kept, no duplicates."""
    out: list[str] = []
    for part in addr.replace(",", ";").split(";"):
        part = part.strip()
        if part and part not in out:
            out.append(part)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Settings of one client instance (RocketMQ's ClientConfig, same defaults)."""

    namesrv_addr: str = ""
    """NameServer addresses separated by ";"; empty reads ``$SKIFF_NAMESRV`` / ``$NAMESRV_ADDR``."""
    instance_name: str = DEFAULT_INSTANCE_NAME
    """Clients of one process with the same NameServers and instance name share one
    connection per broker; give a second consumer of one group its own name."""
    client_ip: str = ""
    """The address put in the client id; empty picks this host's (see `local_ip`)."""
    poll_namesrv_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    request_timeout_ms: int = 3_000
    language: str = "PYTHON"
    credentials: Credentials | None = None
    """Keys every request is signed with (brokers with ``aclEnable=true`` need them);
    None reads ``$SKIFF_ACCESS_KEY``/``$SKIFF_SECRET_KEY`` (`Credentials.from_env`)."""
    tls: TlsClientConfig | None = None
    """Connect to NameServers and brokers with TLS (servers with ``tls.server.mode`` enforcing or
    permissive; docs/tls.md); None connects in plaintext."""

    def __post_init__(self) -> None:
        if not self.namesrv_addr:
            object.__setattr__(self, "namesrv_addr", namesrv_from_env())
        if self.credentials is None:
            object.__setattr__(self, "credentials", Credentials.from_env())
        if not self.client_ip:
            object.__setattr__(self, "client_ip", local_ip())
        self.validate()

    def validate(self) -> None:
        if not self.namesrv_addrs:
            raise ClientConfigError(
                "no NameServer address: pass namesrv_addr ('host:port;host:port') or set $SKIFF_NAMESRV")
        for addr in self.namesrv_addrs:
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ClientConfigError(f"namesrv_addr: {addr!r} is not a host:port address")
        for name in ("poll_namesrv_interval_ms", "heartbeat_broker_interval_ms",
                     "persist_consumer_offset_interval_ms", "rebalance_interval_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ClientConfigError(f"{name} must be more than 0, not {getattr(self, name)}")
        if not self.instance_name:
            raise ClientConfigError("instance_name is empty")

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        return split_namesrv_addr(self.namesrv_addr)


def client_config_for(namesrv_addr: str, instance_name: str, client_config: ClientConfig | None,
                      credentials: Credentials | None) -> ClientConfig:
    """What a facade's constructor arguments mean: ``client_config`` as given, else one built from the
    NameServers, instance name and credentials (a facade takes ``credentials=`` one way only)."""
    if client_config is None:
        return ClientConfig(namesrv_addr, instance_name, credentials=credentials)
    if credentials is not None:
        raise ClientConfigError("give credentials inside client_config or as credentials=, not both")
    return client_config
