"""BrokerServer: the store, the managers, the processors and the background services
of one broker, with an explicit lifecycle.

``start``: recover the store, then the timer that delivers delayed messages
(`skiff.store.timer`), load the tables under ``<store>/config/``, rebuild the
open transactions (`skiff.broker.transactions`), listen, start the services,
register with every NameServer. ``stop``: unregister, answer held pulls, stop
accepting and let requests in progress finish (up to ``shutdownDrainTimeout``),
persist the consumer offsets (with the transactions' progress), stop the timer
(it commits its progress), shut the store down (flush, checkpoint). A broker
asked to listen on port 0 holds a free port from before the store starts,
because every stored message records the broker's address (STOREHOST) and must
record the real one.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from prometheus_client import CollectorRegistry

from skiff.broker.acl import AclService
from skiff.broker.auth import AuthService
from skiff.broker.auth.migrate import as_auth_data, from_plain_config
from skiff.broker.auth.remoting import guard as auth_guard
from skiff.broker.auth.replica import replicate_auth
from skiff.broker.clients import ClientManager
from skiff.broker.compaction import CompactionService
from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.operations import (
    AuthAdminOperation,
    BrokerInfoOperation,
    CancelOperation,
    CompactionOperation,
    ConnectionsOperation,
    ConsumeStatsOperation,
    EndTransactionOperation,
    Gate,
    GroupsOperation,
    LocksOperation,
    MembershipOperation,
    MessagesOperation,
    OffsetResetOperation,
    OffsetsOperation,
    Operations,
    PopOperation,
    PullOperation,
    SendOperation,
    TierOperation,
    TimerStateOperation,
    TopicsOperation,
    TopicStatsOperation,
)
from skiff.broker.ha.service import Replication
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.grpc.auth import GrpcAuth
from skiff.broker.grpc.clients import GrpcClients
from skiff.broker.grpc.offsets import Offsets
from skiff.broker.grpc.routes import NamesrvRoutes
from skiff.broker.grpc.server import GrpcServer
from skiff.broker.kafka.listener import KafkaListener
from skiff.broker.kafka.service import KafkaService
from skiff.broker.locks import RebalanceLockManager
from skiff.broker.long_polling import PullHoldService
from skiff.broker.metrics import BrokerCollector
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.open_files import OpenFileWatch
from skiff.broker.pop.service import PopService
from skiff.broker.processors import Processor
from skiff.broker.processors.admin_compaction import CompactionAdminProcessor
from skiff.broker.processors.admin_tier import TierAdminProcessor
from skiff.broker.processors.admin_groups import GroupAdminProcessor
from skiff.broker.processors.admin_timer import TimerAdminProcessor
from skiff.broker.processors.admin_topics import TopicAdminProcessor
from skiff.broker.processors.auth_admin import AuthAdminProcessor
from skiff.broker.processors.client_manage import ClientManageProcessor
from skiff.broker.processors.consumer import ConsumerProcessor
from skiff.broker.processors.end_transaction import EndTransactionProcessor
from skiff.broker.processors.pop import PopProcessor
from skiff.broker.processors.pull import PullProcessor
from skiff.broker.processors.query import QueryProcessor
from skiff.broker.processors.send import SendProcessor
from skiff.broker.processors.send_back import SendBackProcessor
from skiff.broker.queue_waiters import QueueWaiters
from skiff.broker.redirect import DelayPolicy
from skiff.broker.registration import NamesrvRegistration
from skiff.broker.stats import BrokerStats
from skiff.broker.tier.setup import attach_reads, on_tier_ready, tier_periodics, tier_service, with_tier_queries
from skiff.broker.topics import TopicConfigManager
from skiff.broker.transactions import TransactionRecovery, TransactionService
from skiff.broker.writer import MessageWriter
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.record import pack_host, parse_host_port
from skiff.common.service import Periodic
from skiff.store import MessageStore, RecoveryReport, StoreConfig
from skiff.store.timer import TimerRecovery, TimerService
from skiff.transport import RemotingClient, RemotingServer
from skiff.transport.connection import Connection, Handler
from skiff.transport.metrics_http import MetricsHttpServer
from skiff.transport.rpc_metrics import RpcLatency

log = logging.getLogger(__name__)


class BrokerServer:
    """One broker: ``await start()``, serve until ``await stop()``."""

    def __init__(self, config: BrokerConfig, store_config: StoreConfig, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.store_config = store_config
        self.clock = clock
        self.port = config.listen_port
        self.recovery: RecoveryReport | None = None
        self.timer: TimerService | None = None
        self.timer_recovery: TimerRecovery | None = None
        self.transaction_recovery: TransactionRecovery | None = None
        self.locks = RebalanceLockManager(clock, config.rebalance_lock_max_live_time_ms)
        self.delay = DelayPolicy(config.delay_levels_ms, config.timer_max_delay_sec * 1000)
        self.topics = TopicConfigManager(config, store_config.root, clock, schedule_queue_nums=self.delay.queue_nums)
        self.groups = SubscriptionGroupManager(config, store_config.root, clock)
        self.clients = ClientManager(clock, config.client_channel_expired_time_ms, self._notify_enabled)
        self.offsets = ConsumerOffsetManager(store_config.root)
        self.hold = PullHoldService(config.long_polling_recheck_interval_ms)
        self.writer = MessageWriter(self.delay, clock, reject_transactions=config.reject_transaction_message)
        self._namesrv_client = RemotingClient(tls=config.client_tls())
        self.store: MessageStore
        self.stats: BrokerStats
        self.compaction: CompactionService
        self.registration: NamesrvRegistration
        self._remoting: RemotingServer | None = None
        self._services: list[Periodic] = []
        self._master_periodics: list[Periodic] = []
        """What only a master runs periodically (transaction check-backs, POP revive, compaction):
        they move with the role."""
        self.role = Role.of(config)
        self.replication: Replication
        self.grpc: GrpcServer | None = None
        self.kafka: KafkaListener | None = None
        self.gate: Gate
        self.operations: Operations
        self.metrics: MetricsHttpServer | None = None
        self.rpc_latency: RpcLatency | None = None
        self.acl: AclService | None = None
        if config.acl_enable:
            self.acl = AclService(config.plain_acl_file, config.acl_reload_interval_ms)
            self.acl.load()
        self.auth = AuthService(config, store_config.root, clock)
        """ACL 2.0 (docs/acl.md): its users and ACLs are served and replicated even while it is off."""
        self.auth.load()
        self.plain_grpc_auth: AuthService | None = None
        """Under plain ACL, the gRPC door's checks: plain_acl.yml's accounts as ACL 2.0 policies."""
        if self.acl is not None:
            plain = self.plain_grpc_auth = AuthService.for_plain_acl(config, clock)
            self.acl.on_load = lambda parsed, data: plain.store.adopt(as_auth_data(from_plain_config(parsed, data)))
            self.acl.on_load(self.acl.config, self.acl.data)

    @property
    def addr(self) -> str:
        """The address clients reach this broker at (registered, and stored as STOREHOST)."""
        return self.config.broker_addr(self.port)

    async def start(self) -> None:
        """Recover the store, listen, register; `ListenError` or `ConfigError` say what failed."""
        reserved = _reserve_port(self.config.listen_host) if self.port == 0 else None
        if reserved is not None:
            self.port = reserved.getsockname()[1]
        try:
            self.store = MessageStore(self.store_config, store_host=pack_host(self.config.advertised_ip, self.port),
                                      clock=self.clock)
            self.store.replica = self.role.is_slave
            self.recovery = await asyncio.to_thread(self.store.start)
            try:
                if not self.role.is_slave:
                    await self._start_timer()
                await self._serve()
            except BaseException:
                await asyncio.to_thread(self._shutdown_store)
                raise
        finally:
            if reserved is not None:
                reserved.close()

    async def _serve(self) -> None:
        self.topics.load()
        self.groups.load()
        self.offsets.load()
        self.registration = NamesrvRegistration(self.config, self.topics, self._namesrv_client, self.port, self.role)
        self.open_files = OpenFileWatch(self.topics)
        self.open_files.check()
        self.topics.on_change = self._topics_changed
        self.store.add_dispatch_listener(self.hold.notify)
        self.stats = BrokerStats(self.config, self.store, self.clock, self.role)
        self.stats.held_pulls = lambda: self.hold.held_count
        self.transactions = TransactionService(self.config, self.store, self.topics, self.clients, self.offsets,
                                               self.writer, self.clock)
        self.transaction_recovery = await asyncio.to_thread(self.transactions.recover)
        self.pop = PopService(self.config, self.store, self.topics, self.groups, self.offsets, self.writer,
                              self.clock, self.store_config.root)
        self.pop.start()
        self.gate = Gate(self.config, self.role, self.topics, self.groups)
        if self.auth.enabled or self.plain_grpc_auth is not None:
            self.gate.auth = self.plain_grpc_auth or self.auth
        self.compaction = CompactionService(self.store, self.topics, self.store_config, self.clock)
        self.tier = tier_service(self.config, self.store, self.topics, self.clock)
        self.replication = Replication(self.config, self.role, self.store, self.registration, self.topics,
                                       self.groups, self.offsets, self._namesrv_client,
                                       start_master_services=self._became_master,
                                       stop_master_services=self._stepped_down)
        if self.replication.sync is not None:
            replicate_auth(self.replication.sync, self.auth, self._namesrv_client)
        await self.replication.start(self.port)
        self.stats.replication = self.replication.runtime_table
        self._prepare_metrics()
        handlers = self._handlers()
        self._remoting = RemotingServer(self.config.listen_host, self.port, handlers,
                                        on_connection_close=self.operations.membership.closed,
                                        tls=self.config.server_tls())
        await self._remoting.start()
        if self.metrics is not None:
            await self.metrics.start()
        await self._start_grpc()
        await self._start_kafka()
        self.hold.start()
        self._services = [
            Periodic("persist-consumer-offsets", self.config.flush_consumer_offset_interval_ms / 1000.0,
                     self._persist_offsets),
            Periodic("expire-clients", self.config.client_scan_interval_ms / 1000.0, self._expire_clients),
        ]
        for service in self._services:
            service.start()
        if not self.role.is_slave:
            self._start_master_periodics()
        if self.acl is not None:
            self.acl.start()
        await self.registration.register_all()
        self.registration.start()
        self.replication.run()

    async def _became_master(self) -> None:
        """Promoted (controller mode): what only a master runs moves here. The transaction
        table is rebuilt first from the half and op queues this broker replicated (stepping
        down may have cut them), so the half messages stored before the failover are checked
        back by this broker."""
        await self._start_timer()
        self.transaction_recovery = self.transactions.recover()
        self._start_master_periodics()

    async def _stepped_down(self) -> None:
        await self._stop_timer()
        await self._stop_master_periodics()

    def _start_master_periodics(self) -> None:
        if not self._master_periodics:
            self._master_periodics = [*self.transactions.services(), *self.pop.periodics(),
                                      self.compaction.service(), *tier_periodics(self.tier)]
            for service in self._master_periodics:
                service.start()

    async def _stop_master_periodics(self) -> None:
        services, self._master_periodics = self._master_periodics, []
        for service in services:
            await service.stop()

    async def _start_timer(self) -> None:
        """Only a master delivers delayed messages; a slave has them in its CommitLog copy."""
        if self.timer is None:
            timer = TimerService(self.store, self.store_config, clock=self.clock)
            self.timer_recovery = await asyncio.to_thread(timer.start)
            self.timer = timer

    async def _stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            await asyncio.to_thread(timer.stop)

    async def _start_grpc(self) -> None:
        """The gRPC endpoint for RocketMQ 5.x clients (docs/grpc.md), unless grpcServerPort is 0."""
        if not self.config.grpc_server_port:
            return
        grpc_clients = GrpcClients(self.config, self.clients, self.operations.groups,
                                   self.store_config.max_message_size)
        ops = self.operations
        tier_waiters = QueueWaiters()  # PullMessages held while the tier fetches for them
        tier_waiters.start()
        on_tier_ready(self.tier, tier_waiters.wake)
        self.grpc = GrpcServer(self.config, self.topics, grpc_clients, ops, self.clock,
                               NamesrvRoutes(self._namesrv_client, self.config.namesrv_addrs, lambda: self.addr),
                               Offsets(self.config, ops.gate, ops.offsets, ops.pull, tier_waiters))
        if self.gate.auth is not None:
            self.grpc.auth = GrpcAuth(self.gate.auth, self.gate)
        await self.grpc.start()

    async def _start_kafka(self) -> None:
        """The Kafka protocol listener (docs/kafka.md), unless kafkaListenPort is 0."""
        if self.config.kafka_listen_port:
            await self.start_kafka(self.config.kafka_listen_port)

    async def start_kafka(self, port: int) -> None:
        """Serve Kafka clients on ``port`` (0: a free one); `ListenError` if it is taken.
        Public for `skiff up`, whose Kafka port is a try-out's convenience: taken, it is
        skipped with a warning instead of stopping the broker."""
        if self.gate.auth is not None:
            log.info("the Kafka listener requires SASL (PLAIN, SCRAM-SHA-256/512) with %s's users: access control "
                     "is on (docs/kafka.md)", "plain ACL" if self.acl is not None else "ACL 2.0")
        waiters = QueueWaiters()
        waiters.start()
        self.store.add_dispatch_listener(waiters.notify)
        on_tier_ready(self.tier, waiters.wake)
        service = KafkaService(self.config, self.role, self.operations, self.topics, waiters,
                               lambda: self.kafka.port if self.kafka is not None else 0,
                               self.store_config.file_reserved_time * 3_600_000, self._master_host,
                               broker_addr=lambda: self.addr)
        listener = KafkaListener(self.config.listen_host, port, service, tls=self.config.server_tls())
        await listener.start()
        self.kafka = listener

    def _master_host(self) -> str | None:
        """A slave's master's host, as the NameServer registration last named it."""
        sync = self.replication.sync
        return parse_host_port(sync.master_addr)[0] if sync is not None and sync.master_addr else None

    def _operations(self) -> Operations:
        cfg, store, store_cfg = self.config, self.store, self.store_config
        offsets = OffsetsOperation(store, self.offsets)
        groups = GroupsOperation(self.groups, self.offsets)
        return Operations(
            gate=self.gate,
            send=SendOperation(cfg, self.role, store, self.topics, self.gate, self.writer, self.stats,
                               self.replication.sync_replicas),
            pull=PullOperation(cfg, self.role, store, self.gate, self.clients, self.offsets, self.stats),
            end_transaction=EndTransactionOperation(self.transactions),
            cancel=CancelOperation(lambda: self.timer),
            offsets=offsets,
            topics=TopicsOperation(cfg, store, self.topics, self.offsets, self.registration.settled, self.gate),
            pop=PopOperation(cfg, self.gate, self.pop),
            groups=groups,
            consume_stats=ConsumeStatsOperation(cfg, store, self.gate, self.offsets, self.clients, self.pop),
            offset_reset=OffsetResetOperation(cfg, self.gate, offsets, self.clients),
            connections=ConnectionsOperation(self.clients),
            membership=MembershipOperation(cfg, self.clients, groups, self.topics),
            locks=LocksOperation(self.locks),
            messages=MessagesOperation(store),
            timer=TimerStateOperation(lambda: self.timer, store_cfg.timer_slot_ms, store_cfg.timer_precision_ms,
                                      cfg.delay_levels_ms),
            compaction=CompactionOperation(self.gate, self.compaction),
            topic_stats=TopicStatsOperation(cfg, self.gate, offsets),
            broker_info=BrokerInfoOperation(cfg, store_cfg, self.topics, self.stats),
            tier=TierOperation(self.gate, self.tier),
            auth_admin=AuthAdminOperation(self.auth.store),
        )

    def _handlers(self) -> dict[int, Handler]:
        cfg, store = self.config, self.store
        ops = self.operations = self._operations()
        attach_reads(ops, self.tier, self.hold.wake)
        processors: list[Processor] = [
            SendProcessor(cfg, ops.send),
            PullProcessor(cfg, self.role, ops.pull, store, self.groups, self.hold),
            ConsumerProcessor(ops.offsets, ops.connections, ops.locks),
            ClientManageProcessor(ops.membership),
            SendBackProcessor(cfg, ops.messages, self.topics, self.groups, self.writer, ops.send),
            QueryProcessor(ops.messages),
            TopicAdminProcessor(ops.topics, ops.topic_stats, ops.broker_info),
            GroupAdminProcessor(ops.groups, ops.consume_stats, ops.connections, ops.offset_reset),
            EndTransactionProcessor(ops.end_transaction),
            TimerAdminProcessor(ops.timer, ops.cancel),
            PopProcessor(ops.pop),
            CompactionAdminProcessor(ops.compaction),
            TierAdminProcessor(ops.tier),
            AuthAdminProcessor(ops.auth_admin),
        ]
        handlers: dict[int, Handler] = {}
        for processor in processors:
            handlers.update(processor.handlers())
        handlers = with_tier_queries(handlers, self.tier)
        if self.acl is not None:
            handlers = self.acl.guard(handlers)
        elif self.auth.enabled:
            handlers = auth_guard(handlers, self.auth, self.gate, self.config.broker_cluster_name)
        return handlers if self.rpc_latency is None else self.rpc_latency.wrap(handlers)

    def _prepare_metrics(self) -> None:
        """With metricsPort set: the collectors and the HTTP endpoint (which listens in `_serve`)."""
        if not self.config.metrics_port:
            return
        registry = CollectorRegistry(auto_describe=False)
        self.rpc_latency = RpcLatency(const_labels={"cluster": self.config.broker_cluster_name,
                                                    "node_type": "broker", "node_id": self.config.broker_name})
        registry.register(self.rpc_latency)
        registry.register(BrokerCollector(self))
        self.metrics = MetricsHttpServer(self.config.listen_host, self.config.metrics_port, registry)

    async def stop(self) -> None:
        """Unregister, drain, persist, shut the store down; safe to call once after start."""
        if self._remoting is None:
            return
        remoting, self._remoting = self._remoting, None
        await self.replication.stop_controller()
        if self.metrics is not None:
            await self.metrics.stop()
        await self.registration.stop()
        await self.hold.stop()
        self.pop.release()
        if self.grpc is not None:
            await self.grpc.stop(self.config.shutdown_drain_timeout_ms / 1000.0)
        if self.kafka is not None:
            await self.kafka.stop()
        await remoting.stop(self.config.shutdown_drain_timeout_ms / 1000.0)
        await self.replication.stop()
        for service in self._services:
            await service.stop()
        await self._stop_master_periodics()
        if self.acl is not None:
            await self.acl.stop()
        await self.transactions.commit_progress()
        await self._namesrv_client.close()
        await self._persist_offsets()
        await self.pop.persist()
        await asyncio.to_thread(self._shutdown_store)

    def _shutdown_store(self) -> None:
        """The timer first (it commits its progress), then the store it writes to."""
        try:
            if self.timer is not None:
                self.timer.stop()
        finally:
            self.store.shutdown()

    async def _persist_offsets(self) -> None:
        """Snapshot on the loop, write (fsync) on a thread: the loop never waits for the disk."""
        data = self.offsets.snapshot()
        if data is not None:
            await asyncio.to_thread(self.offsets.write, data)

    def _topics_changed(self) -> None:
        self.registration.trigger()
        self.open_files.check()

    def _notify_enabled(self, group: str) -> bool:
        found = self.groups.get(group)
        return found is None or found.notify_consumer_ids_changed_enable

    def _expire_clients(self) -> None:
        self.clients.expire()

    @property
    def connections(self) -> tuple[Connection, ...]:
        return () if self._remoting is None else self._remoting.connections


def _reserve_port(host: str) -> socket.socket:
    """A socket bound (not listening) to a free port of ``host``; the server binds the same
    port beside it (both set SO_REUSEADDR) before it is closed, so no one else can take it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock
