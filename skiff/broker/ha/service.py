"""Replication's part of a broker: which HA services run, and what changes when the
broker becomes master or slave (docs/replication.md).

| mode | runs |
|---|---|
| classic master | `HAMaster` on the HA port |
| classic slave | `HASlave` (master from the NameServer or haMasterAddress), `SlaveSynchronizer` |
| controller | all three, and the `ReplicasManager`, which switches the role at run time |
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from skiff.broker.config import BrokerConfig, BrokerRole
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.ha.controller import GroupState
from skiff.broker.ha.master import HAMaster
from skiff.broker.ha.replicas import ReplicasManager
from skiff.broker.ha.role import MASTER_ID, Role
from skiff.broker.ha.slave import HASlave
from skiff.broker.ha.sync import SlaveSynchronizer
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.registration import NamesrvRegistration
from skiff.broker.topics import TopicConfigManager
from skiff.protocol.headers.namesrv import RegisterBrokerResponseHeader
from skiff.store import MessageStore
from skiff.store.dispatcher import QueueTouch
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]


class Replication:
    def __init__(self, config: BrokerConfig, role: Role, store: MessageStore, registration: NamesrvRegistration,
                 topics: TopicConfigManager, groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager,
                 client: RemotingClient, *, start_master_services: Hook, stop_master_services: Hook) -> None:
        """``start_master_services`` / ``stop_master_services``: what only a master runs
        (the timer), started on promotion and stopped on stepping down."""
        self.config = config
        self.role = role
        self.store = store
        self.registration = registration
        self.topics = topics
        self._start_master_services = start_master_services
        self._stop_master_services = stop_master_services
        controller = config.enable_controller_mode
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.sync: SlaveSynchronizer | None = None
        self.replicas: ReplicasManager | None = None
        if config.is_slave or controller:
            self.sync = SlaveSynchronizer(config, topics, groups, offsets, client)
            self.slave = HASlave(config, store, on_connect=self.sync.trigger)
            store.add_dispatch_listener(self._unknown_topics)

    async def start(self, listen_port: int) -> None:
        cfg = self.config
        if not cfg.is_slave:
            self.master = HAMaster(cfg, self.store, cfg.listen_host, cfg.ha_port(listen_port))
            await self.master.start(any_port_if_taken=not cfg.ha_listen_port)
            self.registration.ha_addr = cfg.ha_addr(listen_port, self.master.port)
        if cfg.is_slave:
            assert self.slave is not None and self.sync is not None
            self.registration.on_master = self._classic_answer
        if cfg.enable_controller_mode:
            assert self.master is not None and self.slave is not None
            self.replicas = ReplicasManager(cfg, self.role, self.store, self.master, self.slave,
                                            self.registration.broker_addr, self.registration.ha_addr,
                                            on_master=self._became_master, on_slave=self._became_slave)

    def run(self) -> None:
        """Start the loops (after the first registration)."""
        for service in (self.slave, self.sync, self.replicas):
            if service is not None:
                service.start()

    @property
    def sync_replicas(self) -> HAMaster | None:
        return self.master

    def _classic_answer(self, answer: RegisterBrokerResponseHeader) -> None:
        assert self.slave is not None and self.sync is not None
        self.slave.set_master(answer.ha_server_addr)
        self.sync.set_master(answer.master_addr)

    def _unknown_topics(self, touched: Sequence[QueueTouch]) -> None:
        """A slave that replicates a topic it does not know syncs the topic table now."""
        if self.sync is not None and self.role.is_slave and any(t not in self.topics for t, _, _ in touched):
            self.sync.trigger()

    async def _became_master(self, state: GroupState) -> None:
        assert self.sync is not None
        self.sync.set_master(None)
        self._adopt_unsynced_topics()
        self.role.role = self.config.broker_role
        self.role.broker_id = MASTER_ID
        self.store.replica = False
        await self._start_master_services()
        await self.registration.register_all()

    async def _became_slave(self, state: GroupState) -> None:
        assert self.master is not None and self.sync is not None
        was_master = not self.role.is_slave
        self.role.role = BrokerRole.SLAVE
        self.role.broker_id = self.config.broker_id
        self.store.replica = True
        self.master.drop_all("this broker is no longer master")
        if was_master:
            await self._stop_master_services()
            await self.registration.register_all()
        self.sync.set_master(state.master_addr)

    def _adopt_unsynced_topics(self) -> None:
        """A slave learns a new topic's config at its next metadata sync; promoted before
        that (the master died meanwhile), it holds the topic's messages but would answer
        TOPIC_NOT_EXIST for them. Such a topic gets a config with at least as many queues
        as it has."""
        for topic in self.store.topics():
            if topic not in self.topics:
                queues = max(max(self.store.queue_ids(topic), default=0) + 1, self.config.default_topic_queue_nums)
                self.topics.find_or_create(topic, queues)
                log.warning("topic %s has messages but no config yet (not synced before the promotion): "
                            "created with %d queues", topic, queues)

    def runtime_table(self) -> dict[str, str]:
        table: dict[str, str] = {}
        if self.master is not None:
            table.update(self.master.runtime_table())
        if self.slave is not None:
            table.update(self.slave.runtime_table())
        if self.replicas is not None:
            table.update(self.replicas.runtime_table())
        return table

    async def stop_controller(self) -> None:
        """Step down at once (a clean stop): sends are refused and the lease revoked, so a
        slave takes over without waiting for the lease to expire."""
        if self.replicas is not None:
            self.role.lease_until = 0.0
            await self.replicas.stop()

    async def stop(self) -> None:
        await self.stop_controller()
        if self.master is not None:
            await self.master.stop()
        for service in (self.slave, self.sync):
            if service is not None:
                await service.stop()
