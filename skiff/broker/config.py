"""BrokerConfig: RocketMQ's broker keys, and loading it with the store's config
from one ``broker.conf`` plus command-line overrides.

Keys are RocketMQ's camelCase names (``brokerName``, ``listenPort``,
``namesrvAddr``, ``flushDiskType``, ...). One file holds the keys of both the
broker and its store, as in RocketMQ; `load_configs` hands each key to every
config that knows it, and an unknown key is an error that names it. Intervals
keep RocketMQ's key names (which carry no unit) and are milliseconds.
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

from skiff.common.config import build_config, camel_to_snake, snake_to_camel, to_properties
from skiff.common.errors import ConfigError
from skiff.common.limits import QUEUES_PER_TOPIC_MAX, TIER_COMPACTED_MERGE_LIMIT_BYTES, TIER_COMPACTED_MERGE_MAX_BYTES
from skiff.common.names import topic_error
from skiff.common.record import parse_host_port
from skiff.store import StoreConfig
from skiff.transport.tls import TlsSettings

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")
_TWO_YEARS_S = 2 * 365 * 86_400


class BrokerRole(enum.Enum):
    ASYNC_MASTER = 0
    SYNC_MASTER = 1
    SLAVE = 2


class GrpcServerEngine(enum.Enum):
    """What serves the gRPC door (docs/grpc.md): Skiff's own HTTP/2 framing, or grpcio's server
    (the fallback; it costs 150-250 µs of CPU per call on its own)."""

    SKIFF = "skiff"
    GRPCIO = "grpcio"


def _default_broker_name() -> str:
    """RocketMQ names a broker after its host when broker.conf does not."""
    name = re.sub(r"[^a-zA-Z0-9_-]", "-", socket.gethostname()) or "broker"
    return name[:64]


@dataclass(frozen=True, slots=True)
class BrokerConfig(TlsSettings):
    """A broker's settings (the store's are `skiff.store.StoreConfig`; the ``tls.*`` keys `TlsSettings`')."""

    ALIASES: ClassVar[dict[str, str]] = {
        **TlsSettings.TLS_KEYS,
        "brokerIP1": "broker_ip1",
        "brokerIP2": "broker_ip2",
        "registerNameServerPeriod": "register_name_server_period_ms",
        "registerBrokerTimeoutMills": "register_broker_timeout_ms",
        "shortPollingTimeMills": "short_polling_time_ms",
        "longPollingRecheckInterval": "long_polling_recheck_interval_ms",
        "clientChannelExpiredTime": "client_channel_expired_time_ms",
        "clientScanInterval": "client_scan_interval_ms",
        "flushConsumerOffsetInterval": "flush_consumer_offset_interval_ms",
        "rebalanceLockMaxLiveTime": "rebalance_lock_max_live_time_ms",
        "transactionTimeOut": "transaction_time_out_ms",
        "transactionCheckInterval": "transaction_check_interval_ms",
        "shutdownDrainTimeout": "shutdown_drain_timeout_ms",
        "haSendHeartbeatInterval": "ha_send_heartbeat_interval_ms",
        "haHousekeepingInterval": "ha_housekeeping_interval_ms",
        "slaveTimeout": "slave_timeout_ms",
        "slaveSyncInterval": "slave_sync_interval_ms",
        "controllerLeaseTtl": "controller_lease_ttl_ms",
        "haMaxTimeSlaveNotCatchup": "ha_max_time_slave_not_catchup_ms",
        "reviveInterval": "pop_revive_interval_ms",
        "popStatePersistInterval": "pop_state_persist_interval_ms",
        "defaultInvisibleTimeMills": "default_invisible_time_ms",
        "minInvisibleTimeMillsForRecv": "min_invisible_time_for_recv_ms",
        "renewSchedulePeriodMillis": "renew_schedule_period_ms",
        "renewAheadTimeMillis": "renew_ahead_time_ms",
        "renewMaxTimeMillis": "renew_max_time_ms",
        "liteTtlCheckInterval": "lite_ttl_check_interval_ms",
        "minLiteTTl": "min_lite_ttl_ms",
        "liteSubscriptionCheckInterval": "lite_subscription_check_interval_ms",
        "liteSubscriptionCheckTimeoutMills": "lite_subscription_check_timeout_ms",
        "aclReloadInterval": "acl_reload_interval_ms",
    }

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = field(default_factory=_default_broker_name)
    broker_id: int = 0
    """0 is the master of its broker group; a slave has an id above 0."""
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    """ASYNC_MASTER answers sends at once; SYNC_MASTER after a slave has them; SLAVE follows
    its master and refuses sends (docs/replication.md)."""
    listen_host: str = "0.0.0.0"
    """The address to listen on (Skiff's key; RocketMQ always listens on every address)."""
    listen_port: int = 10911
    """0 picks a free port (tests)."""
    broker_ip1: str = ""
    """The address clients reach this broker at: registered with the NameServers and
    stored as every message's STOREHOST. Empty: 127.0.0.1 when listening on loopback,
    else the host's first non-loopback IPv4 address."""
    broker_ip2: str = ""
    ha_listen_port: int = 0
    """0: listenPort + 1, as RocketMQ."""
    ha_master_address: str = ""
    """A slave's master HA address (host:port); empty: the one the NameServer answers."""
    ha_send_heartbeat_interval_ms: int = 5_000
    """An idle master sends an empty frame, an idle slave its offset, this often."""
    ha_housekeeping_interval_ms: int = 20_000
    """An HA connection silent this long is closed."""
    ha_transfer_batch_size: int = 32 * 1024
    """Largest body of one HA frame."""
    ha_slave_fallbehind_max: int = 256 << 20
    """SYNC_MASTER answers SLAVE_NOT_AVAILABLE at once when the slave is this many bytes behind."""
    slave_timeout_ms: int = 2_000
    """How long a SYNC_MASTER send waits for a slave (RocketMQ 4.9.3+: 3000; below the
    clients' 3 s send timeout here, so they get FLUSH_SLAVE_TIMEOUT rather than time out)."""
    slave_sync_interval_ms: int = 10_000
    """How often a slave copies topics, groups and consumer offsets from its master
    (Skiff's key; RocketMQ's fixed period), besides at once on (re)connection."""
    enable_controller_mode: bool = False
    """Brokers of one brokerName elect their master through etcd (docs/replication.md);
    brokerId is then each broker's fixed identity (1, 2, ...) and brokerRole what it is
    while master (ASYNC_MASTER or SYNC_MASTER)."""
    controller_etcd_endpoints: str = ""
    """etcd client endpoints, ``host:port,host:port``."""
    controller_lease_ttl_ms: int = 10_000
    """The master's lease: it stops taking sends when it could not renew it for this long,
    and a new master is elected once etcd lets it expire (whole seconds, at least 1 s)."""
    ha_max_time_slave_not_catchup_ms: int = 15_000
    """A slave that has not caught up with the master for this long leaves the SyncStateSet."""
    allow_unclean_election: bool = False
    """Let a broker outside the SyncStateSet become master (it may lack acknowledged messages)."""
    slave_read_enable: bool = False
    """A master may suggest that consumers far behind read from a slave."""
    access_message_in_memory_max_ratio: int = 40
    """With slaveReadEnable, a pull further behind than this % of RAM is pointed at a slave."""
    namesrv_addr: str = ""
    """NameServers as ``host:port;host:port``; empty registers nowhere."""
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    """Queues of the TBW102 template that producers auto-create topics from."""
    broker_permission: int = 6
    """Perm bits of the whole broker: 2 write, 4 read."""
    register_name_server_period_ms: int = 30_000
    register_broker_timeout_ms: int = 6_000
    long_polling_enable: bool = True
    short_polling_time_ms: int = 1_000
    """How long a suspend-flagged pull waits when long polling is off."""
    long_polling_recheck_interval_ms: int = 5_000
    """Suspended pulls are re-checked at least this often, whatever wakes them."""
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    timer_max_delay_sec: int = _TWO_YEARS_S
    """A delayed message due further ahead than this is refused."""
    client_channel_expired_time_ms: int = 120_000
    client_scan_interval_ms: int = 10_000
    flush_consumer_offset_interval_ms: int = 5_000
    rebalance_lock_max_live_time_ms: int = 60_000
    max_reconsume_times: int = 16
    """Retries before a message goes to the DLQ, for groups created automatically."""
    transaction_time_out_ms: int = 6_000
    transaction_check_interval_ms: int = 60_000
    transaction_check_max: int = 15
    reject_transaction_message: bool = False
    enable_property_filter: bool = False
    """Serve SQL92 subscriptions (RocketMQ's default is off)."""
    max_transfer_count_on_message_in_memory: int = 1024
    """Most messages one pull answers. RocketMQ caps at 32; Skiff answers what a client
    asks for up to this: an answer is slices of the mapped CommitLog, so a bigger one costs
    no copy, and per-pull costs (request, frame, wake-up) are what limit a consumer."""
    max_transfer_bytes_on_message_in_memory: int = 1 << 20
    """Most bytes one pull answers (RocketMQ: 256 KiB; Kafka's per-partition fetch: 1 MiB)."""
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    shutdown_drain_timeout_ms: int = 5_000
    """How long shutdown waits for requests in progress to be answered."""
    pop_revive_interval_ms: int = 1_000
    """How often POP's reviver re-queues messages whose invisible time has passed (``reviveInterval``)."""
    pop_from_retry_probability: int = 20
    """Percent of non-orderly pops that read the group's retry topic before the topic's queues."""
    pop_state_persist_interval_ms: int = 5_000
    """How often the POP cursors and in-flight messages are written when they changed (Skiff's key)."""
    max_pop_polling_size: int = 100_000
    """Most pops waiting for messages at once (long polling); past it a pop is answered POLLING_FULL."""
    grpc_server_port: int = 8081
    """Port of the gRPC endpoint for RocketMQ 5.x clients (the proxy's key); 0 turns it off."""
    grpc_server_engine: GrpcServerEngine = GrpcServerEngine.SKIFF
    """skiff: the gRPC door on Skiff's own HTTP/2 codec; grpcio: grpcio's server (Skiff's key, docs/grpc.md)."""
    default_invisible_time_ms: int = 60_000
    """How long a gRPC push consumer's messages stay hidden at a time (the proxy's key)."""
    min_invisible_time_for_recv_ms: int = 10_000
    """The shortest invisible duration a gRPC receive may ask for (the proxy's key)."""
    enable_topic_message_type_check: bool = True
    """gRPC sends must match their topic's message.type (the proxy's key); false mixes them."""
    renew_schedule_period_ms: int = 5_000
    """How often push consumers' held messages are looked at for renewal (the proxy's key)."""
    renew_ahead_time_ms: int = 10_000
    """A held message due within this long is hidden for another defaultInvisibleTimeMills."""
    renew_max_time_ms: int = 3 * 3_600_000
    """Renewals stop after this long; the message then comes back (the proxy's key)."""
    lite_ttl_check_interval_ms: int = 120_000
    """How often idle lite topics are looked for (RocketMQ 5.5's key; skiff.broker.grpc.lite_expiry)."""
    min_lite_ttl_ms: int = 15 * 60_000
    """A lite topic is never expired within this long of its last message, nor in this long after
    the broker starts (5.5's key)."""
    lite_subscription_check_interval_ms: int = 120_000
    """How often lite subscriptions no client has synced lately are looked for (5.5's key)."""
    lite_subscription_check_timeout_ms: int = 180_000
    """A lite subscription its client has not synced for this long is dropped (5.5's key; the
    clients sync their whole set every 30 s)."""
    acl_enable: bool = False
    """Check every request against plain_acl.yml (RocketMQ 4.x plain ACL; docs/acl.md)."""
    plain_acl_file: str = "conf/plain_acl.yml"
    """The ACL file (Skiff's key; RocketMQ reads $ROCKETMQ_HOME/conf/plain_acl.yml). Relative to the
    working directory."""
    acl_reload_interval_ms: int = 1_000
    """How often the ACL file is checked for changes."""
    authentication_enabled: bool = False
    """ACL 2.0 (RocketMQ 5.3's key): every remoting request and gRPC call must be signed by a user
    of this broker (docs/acl.md). Not together with aclEnable."""
    authorization_enabled: bool = False
    """ACL 2.0: every request is checked against its user's policies (RocketMQ 5.3's key)."""
    authentication_whitelist: str = ""
    """Comma list of request codes (remoting: the number; gRPC: the request's protobuf full name,
    e.g. apache.rocketmq.v2.QueryRouteRequest) that need no signature."""
    authorization_whitelist: str = ""
    """Comma list of request codes, as authenticationWhitelist, that need no policy."""
    init_authentication_user: str = ""
    """JSON {"username": .., "password": ..}: created as a Super user at start when absent."""
    inner_client_authentication_credentials: str = ""
    """JSON {"accessKey": .., "secretKey": ..}: a Super user created at start when absent, for the
    broker's own calls to other brokers (a slave's metadata sync signs with it)."""
    migrate_auth_from_v1_enabled: bool = False
    """At start, turn plainAclFile's accounts into ACL 2.0 users and policies (users that exist
    are left alone), as RocketMQ 5.3's AuthMigrator."""
    metrics_port: int = 0
    """Serve Prometheus metrics at http://listenHost:metricsPort/metrics; 0 is off (docs/metrics.md)."""
    kafka_listen_port: int = 0
    """Port of the Kafka protocol listener, for Kafka clients (docs/kafka.md); 0 is off."""
    tier_storage_url: str = ""
    """Where topics with tiered.storage=true keep their old messages: file:///a/directory or
    s3://bucket/prefix (docs/tiered-storage.md); empty: no tier."""
    tier_s3_endpoint: str = ""
    """An S3-compatible server that is not AWS (MinIO, moto): its URL. Credentials come from
    boto3's usual chain (environment, ~/.aws, instance role), never from this file."""
    tier_s3_region: str = ""
    tier_upload_interval_ms: int = 10_000
    """How often the master looks for sealed messages of tiered topics to upload."""
    tier_delete_grace_ms: int = 86_400_000
    """How long the tier of a deleted topic stays before the uploader deletes it (a day: time to
    notice a mistake; the topic recreated meanwhile keeps it)."""
    tier_seal_ms: int = 60_000
    """A message is uploaded once it is flushed and this much older than now: the tail a
    consumer is still reading stays out of the tier's small files."""
    tier_file_delete_delay_ms: int = 60_000
    """How long a tiered file a compacted topic's rewrite or retention.tiered.ms dropped from the
    manifest stays before the uploader deletes it (Kafka's file.delete.delay.ms, 60 s): a Spark job
    planned from the older manifest, or a slave, still reads it meanwhile; 0 deletes at once."""
    tier_compacted_merge_max_bytes: int = TIER_COMPACTED_MERGE_MAX_BYTES
    """Bytes (of Parquet) up to which a compacted tiered queue's adjacent small files are merged into
    one (Kafka's log cleaner groups segments up to segment.bytes): fewer, larger files for each
    compacted upload to fetch; from 1 (never merge) to TIER_COMPACTED_MERGE_LIMIT_BYTES."""

    def validate(self) -> None:
        for name in ("listen_port", "ha_listen_port", "metrics_port", "grpc_server_port", "kafka_listen_port"):
            if not 0 <= getattr(self, name) <= 65535:
                _fail(name, getattr(self, name), "is not a port (0-65535)")
        if self.broker_id < 0:
            _fail("broker_id", self.broker_id, "must be 0 (master) or more")
        if self.enable_controller_mode:
            self._validate_controller()
        elif (self.broker_role is BrokerRole.SLAVE) != (self.broker_id > 0):
            _fail("broker_id", self.broker_id, f"does not fit brokerRole={self.broker_role.name}: a master has "
                  f"brokerId 0, a SLAVE more than 0")
        if self.ha_master_address:
            _check_host_port("ha_master_address", self.ha_master_address)
        if self.ha_transfer_batch_size < 1024:
            _fail("ha_transfer_batch_size", self.ha_transfer_batch_size, "must be at least 1024")
        if not 1 <= self.access_message_in_memory_max_ratio <= 100:
            _fail("access_message_in_memory_max_ratio", self.access_message_in_memory_max_ratio,
                  "must be a percentage from 1 to 100")
        for name in ("broker_name", "broker_cluster_name"):
            why = topic_error(getattr(self, name))
            if why is not None:
                _fail(name, getattr(self, name), f"is not a valid name: {why}")
        for name in ("broker_ip1", "broker_ip2"):
            value = getattr(self, name)
            if value and not _is_ip(value):
                _fail(name, value, "is not an IP address")
        self.namesrv_addrs  # noqa: B018 - parses and validates namesrvAddr
        self.delay_levels_ms  # noqa: B018 - parses and validates messageDelayLevel
        if not 1 <= self.default_topic_queue_nums <= QUEUES_PER_TOPIC_MAX:
            _fail("default_topic_queue_nums", self.default_topic_queue_nums, f"must be from 1 to {QUEUES_PER_TOPIC_MAX}")
        if not 0 <= self.broker_permission <= 15:
            _fail("broker_permission", self.broker_permission, "must be perm bits from 0 to 15 (2 write, 4 read)")
        if self.acl_enable and (self.authentication_enabled or self.authorization_enabled):
            _fail("acl_enable", self.acl_enable, "is RocketMQ 4.x's plain ACL and cannot run with ACL 2.0 "
                  "(authenticationEnabled/authorizationEnabled): pick one; `skiff acl migrate` turns a "
                  "plain_acl.yml into ACL 2.0 users and policies")
        for f in dataclasses.fields(self):
            if (f.name.endswith("_ms") and f.name != "tier_file_delete_delay_ms") or f.name in _POSITIVE:  # 0: at once
                if getattr(self, f.name) <= 0:
                    _fail(f.name, getattr(self, f.name), "must be more than 0")
        if self.max_reconsume_times < 0:
            _fail("max_reconsume_times", self.max_reconsume_times, "must not be negative")
        if self.tier_file_delete_delay_ms < 0:
            _fail("tier_file_delete_delay_ms", self.tier_file_delete_delay_ms, "must not be negative")
        if not 1 <= self.tier_compacted_merge_max_bytes <= TIER_COMPACTED_MERGE_LIMIT_BYTES:
            _fail("tier_compacted_merge_max_bytes", self.tier_compacted_merge_max_bytes,
                  f"must be from 1 to {TIER_COMPACTED_MERGE_LIMIT_BYTES} (bytes of a merged tiered file; a larger "
                  f"file would fill the tier's file cache)")
        if not 0 <= self.pop_from_retry_probability <= 100:
            _fail("pop_from_retry_probability", self.pop_from_retry_probability, "must be a percentage (0-100)")
        self.validate_tls()

    def _validate_controller(self) -> None:
        if self.broker_id < 1:
            _fail("broker_id", self.broker_id, "must be 1 or more with enableControllerMode: it names the "
                  "broker in its group, and the elected master registers as 0")
        if self.broker_role is BrokerRole.SLAVE:
            _fail("broker_role", self.broker_role.name, "must be ASYNC_MASTER or SYNC_MASTER with "
                  "enableControllerMode: the election decides who follows")
        if not self.etcd_endpoints:
            _fail("controller_etcd_endpoints", self.controller_etcd_endpoints,
                  "must name at least one etcd endpoint (host:port) with enableControllerMode")
        if self.controller_lease_ttl_ms < 1000:
            _fail("controller_lease_ttl_ms", self.controller_lease_ttl_ms, "must be at least 1000 (etcd leases "
                  "are whole seconds)")

    @property
    def etcd_endpoints(self) -> tuple[str, ...]:
        addrs = tuple(a.strip() for a in self.controller_etcd_endpoints.split(",") if a.strip())
        for addr in addrs:
            _check_host_port("controller_etcd_endpoints", addr, self.controller_etcd_endpoints)
        return addrs

    @property
    def namesrv_addrs(self) -> tuple[str, ...]:
        addrs = tuple(a.strip() for a in self.namesrv_addr.split(";") if a.strip())
        for addr in addrs:
            _check_host_port("namesrv_addr", addr, self.namesrv_addr)
        return addrs

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        """Delay of each level (level 1 first) in ms."""
        levels = []
        for i, text in enumerate(self.message_delay_level.split(), start=1):
            m = _LEVEL.match(text)
            if m is None or int(m[1]) <= 0:
                _fail("message_delay_level", self.message_delay_level,
                      f"has {text!r} at level {i}, not a positive number followed by s, m, h or d")
            levels.append(int(m[1]) * _UNIT_MS[m[2]])
        if not levels:
            _fail("message_delay_level", self.message_delay_level, "names no level")
        return tuple(levels)

    @property
    def advertised_ip(self) -> str:
        return self.broker_ip1 or default_broker_ip(self.listen_host)

    def broker_addr(self, port: int) -> str:
        """``ip:port`` clients reach this broker at, given the port it listens on."""
        return f"{self.advertised_ip}:{port}"

    def ha_port(self, port: int) -> int:
        """The HA port, given the port the broker listens on."""
        return self.ha_listen_port or port + 1

    def ha_addr(self, port: int, ha_port: int = 0) -> str:
        """The HA address registered (``ha_port``: the one bound, if known)."""
        return f"{self.broker_ip2 or self.advertised_ip}:{ha_port or self.ha_port(port)}"

    @property
    def is_slave(self) -> bool:
        """A configured slave (classic HA); in controller mode `Role` says what it is now."""
        return self.broker_role is BrokerRole.SLAVE and not self.enable_controller_mode


_POSITIVE = frozenset({"timer_max_delay_sec", "transaction_check_max", "max_transfer_count_on_message_in_memory",
                       "max_transfer_bytes_on_message_in_memory", "ha_slave_fallbehind_max",
                       "max_pop_polling_size"})


def _check_host_port(name: str, addr: str, whole: str | None = None) -> None:
    try:
        host, port = parse_host_port(addr)
    except ValueError:
        host, port = "", 0
    if not host or not 0 < port < 65536:
        _fail(name, whole or addr, f"has {addr!r}, which is not host:port" if whole else "is not host:port")


def _fail(name: str, value: Any, why: str) -> NoReturn:
    raise ConfigError(f"{key_of(name)}: {value!r} {why}")


def key_of(name: str) -> str:
    """The RocketMQ key of a BrokerConfig field."""
    return next((k for k, v in BrokerConfig.ALIASES.items() if v == name), None) or snake_to_camel(name)


def config_properties(broker: BrokerConfig, store: StoreConfig) -> dict[str, str]:
    """Both configs as broker.conf would spell them (GET_BROKER_CONFIG's answer)."""
    values = to_properties(broker)
    for name in TlsSettings.TLS_SECRETS:
        values[snake_to_camel(name)] = "******" if getattr(broker, name) else ""
    return {**to_properties(store), **{key_of(f.name): values[snake_to_camel(f.name)] for f in dataclasses.fields(broker)}}


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def default_broker_ip(listen_host: str) -> str:
    """127.0.0.1 for a loopback listener, else this host's first non-loopback IPv4."""
    if _is_ip(listen_host) and ipaddress.ip_address(listen_host).is_loopback:
        return "127.0.0.1"
    if _is_ip(listen_host) and not ipaddress.ip_address(listen_host).is_unspecified:
        return listen_host
    return _first_non_loopback_ipv4() or "127.0.0.1"


def _first_non_loopback_ipv4() -> str | None:
    try:
        candidates = socket.gethostbyname_ex(socket.gethostname())[2]
    except OSError:
        candidates = []
    for ip in candidates:
        if not ip.startswith("127."):
            return ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


def _known_keys(cls: type) -> tuple[frozenset[str], Mapping[str, str]]:
    return frozenset(f.name for f in dataclasses.fields(cls)), getattr(cls, "ALIASES", {})


def _knows(cls: type, key: str) -> bool:
    names, aliases = _known_keys(cls)
    return key in aliases or key in names or camel_to_snake(key) in names


def load_configs(*sources: Mapping[str, str]) -> tuple[BrokerConfig, StoreConfig]:
    """The broker's and the store's config from ``sources`` (later ones win).

    Each key goes to every config that knows it; a key neither knows is a
    `ConfigError` naming it, as is any bad value. The store directory must be
    one this process can create and write.
    """
    broker_keys: dict[str, str] = {}
    store_keys: dict[str, str] = {}
    for source in sources:
        for key, value in source.items():
            known = False
            if _knows(BrokerConfig, key):
                broker_keys[key] = value
                known = True
            if _knows(StoreConfig, key):
                store_keys[key] = value
                known = True
            if not known:
                raise ConfigError(f"unknown configuration key {key!r}: neither the broker nor the store has it")
    broker = build_config(BrokerConfig, broker_keys)
    store = build_config(StoreConfig, store_keys)
    check_writable_dir(store.root)
    return broker, store


def check_writable_dir(path: str) -> None:
    """Create ``path`` if needed; `ConfigError` if it cannot be made or written."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"storePathRootDir: cannot create {path}: {exc.strerror}") from None
    if not os.path.isdir(path):
        raise ConfigError(f"storePathRootDir: {path} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"storePathRootDir: {path} is not writable by this user")
