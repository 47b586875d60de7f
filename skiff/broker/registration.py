"""Registration with the NameServers: REGISTER_BROKER to every one of them every
``registerNameServerPeriod`` (30 s) and at once after a topic is created or
deleted, carrying the whole topic table with its DataVersion; UNREGISTER_BROKER
to each on shutdown. NameServers do not talk to each other, so each gets its own
request; one that is down is retried at the next period and logged once until
it answers again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.topics import TopicConfigManager
from skiff.common.service import Periodic
from skiff.protocol.bodies.register import RegisterBrokerBody, register_broker_request
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import RemotingError
from skiff.protocol.headers.namesrv import (
    BrokerIdentityHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
)
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)


class NamesrvRegistration:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, client: RemotingClient, port: int,
                 role: Role) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.client = client
        self.broker_addr = config.broker_addr(port)
        self.ha_addr = config.ha_addr(port)
        self.namesrvs = config.namesrv_addrs
        self._timeout_ms = config.register_broker_timeout_ms
        self._periodic = Periodic("register-broker", config.register_name_server_period_ms / 1000.0,
                                  self.register_all)
        self._again = asyncio.Event()
        self._trigger_task: asyncio.Task[None] | None = None
        self._failing: set[str] = set()
        self.registrations = 0
        self.on_master: Callable[[RegisterBrokerResponseHeader], None] | None = None
        """Called with each answer to a slave's registration (its master's addresses)."""

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        """Stop registering and unregister from every NameServer."""
        await self._periodic.stop()
        if self._trigger_task is not None:
            self._trigger_task.cancel()
            await asyncio.gather(self._trigger_task, return_exceptions=True)
        await asyncio.gather(*(self._unregister(addr) for addr in self.namesrvs))

    def trigger(self) -> None:
        """Register soon (the topic table changed); changes made meanwhile share one round."""
        self._again.set()
        if self._trigger_task is None or self._trigger_task.done():
            try:
                self._trigger_task = asyncio.get_running_loop().create_task(self._triggered())
            except RuntimeError:  # no loop yet (loading): the first registration carries it
                pass

    async def settled(self, timeout_s: float) -> None:
        """Wait until the topic changes made so far are registered, at most ``timeout_s``
        (a NameServer that is down must not hold an admin answer).

        RocketMQ's broker registers a created or deleted topic before it answers: a
        client that routes the topic right after sees it. Without the wait a producer
        could route a just-created topic by the auto-create template and send to
        queues the topic does not have.
        """
        task = self._trigger_task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=timeout_s)

    async def _triggered(self) -> None:
        while self._again.is_set():
            self._again.clear()
            await self.register_all()

    async def register_all(self) -> None:
        body = RegisterBrokerBody(self.topics.wrapper())
        header = RegisterBrokerRequestHeader(
            self.config.broker_name, self.broker_addr, self.config.broker_cluster_name, self.ha_addr,
            self.role.broker_id, False)
        await asyncio.gather(*(self._register(addr, header, body) for addr in self.namesrvs))
        self.registrations += 1

    async def _register(self, addr: str, header: RegisterBrokerRequestHeader, body: RegisterBrokerBody) -> None:
        resp = await self._call(addr, register_broker_request(header, body), "register with")
        if resp is not None and self.on_master is not None:
            self.on_master(RegisterBrokerResponseHeader.from_ext(resp.ext_fields))

    async def _unregister(self, addr: str) -> None:
        header = BrokerIdentityHeader(self.config.broker_name, self.broker_addr, self.config.broker_cluster_name,
                                      self.role.broker_id)
        await self._call(addr, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext()),
                         "unregister from")

    async def _call(self, addr: str, cmd: RemotingCommand, what: str) -> RemotingCommand | None:
        try:
            resp = await self.client.invoke(addr, cmd, self._timeout_ms)
        except RemotingError as exc:
            self._failed(addr, what, str(exc))
            return None
        if resp.code != ResponseCode.SUCCESS:
            self._failed(addr, what, f"code {resp.code}: {resp.remark}")
            return None
        if addr in self._failing:
            self._failing.discard(addr)
            log.info("NameServer %s answers again", addr)
        return resp

    def _failed(self, addr: str, what: str, why: str) -> None:
        if addr not in self._failing:
            log.warning("cannot %s NameServer %s: %s", what, addr, why)
        self._failing.add(addr)
