"""ClientInstance: what the producers, consumers and admins of one process share
(RocketMQ's MQClientInstance).

One instance per (event loop, NameServer list, instance name): it holds the
client id, one `RemotingClient` (one connection per broker address), the route
cache and the typed API, answers the requests brokers send to clients, and
runs the background services:

| service         | every                                   | does                                          |
|-----------------|-----------------------------------------|-----------------------------------------------|
| route refresh   | ``poll_namesrv_interval_ms`` (30 s)     | re-fetch every cached and subscribed topic    |
| heartbeat       | ``heartbeat_broker_interval_ms`` (30 s) | HEART_BEAT to every broker (masters only when there is no consumer) |
| offset persist  | ``persist_consumer_offset_interval_ms`` (5 s) | each consumer's ``persist_offsets()``   |
| rebalance       | ``rebalance_interval_ms`` (20 s), or at once on `rebalance_now` | each consumer's ``rebalance()`` |

Producers and consumers register by group (`register_producer`,
`register_consumer`); a consumer supplies the `ConsumerImpl` methods. Each
user calls `start` once and `shutdown` once: the instance starts with its
first user and, when its last user leaves, unregisters from every broker and
closes its connections.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol

from skiff.client._impl.admin_api import AdminAPI
from skiff.client._impl.api import NameServers
from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig
from skiff.client._impl.route import RouteCache
from skiff.client.errors import ClientStateError
from skiff.common.message import MessageQueue
from skiff.common.names import group_error
from skiff.common.properties import Prop
from skiff.common.service import Periodic, Service
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo, ResetOffsetBody
from skiff.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData
from skiff.protocol.bodies.route import TopicRouteData
from skiff.protocol.codes import SKIFF_VERSION, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.client_calls import (
    GetConsumerRunningInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from skiff.protocol.headers.transaction import CheckTransactionStateRequestHeader
from skiff.protocol.message_codec import decode_stored_messages
from skiff.transport.client import RemotingClient
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 5.0
CLIENT_VERSION_PROP = "PROP_CLIENT_VERSION"


class ProducerImpl(Protocol):
    """What the instance needs from a registered producer (nothing yet but the
    optional ``check_transaction_state(broker_addr, msg, header)`` of issue 5)."""


class ConsumerImpl(Protocol):
    """What the instance calls on a registered consumer."""

    def consumer_data(self) -> ConsumerData:
        """The group's heartbeat entry: model, consume type, from-where, subscriptions."""
        ...

    async def rebalance(self) -> None:
        """Re-assign queues now (periodic, after a NOTIFY_CONSUMER_IDS_CHANGED, on start)."""
        ...

    async def persist_offsets(self) -> None:
        """Commit consumed offsets (every 5 s and on shutdown)."""
        ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """The broker asks to restart ``topic``'s queues at these offsets (RESET_CONSUMER_CLIENT_OFFSET)."""
        ...

    def running_info(self) -> ConsumerRunningInfo:
        """The answer to GET_CONSUMER_RUNNING_INFO."""
        ...


def build_client_id(config: ClientConfig, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """``ip@instanceName``, or ``ip@pid`` for the DEFAULT name (RocketMQ's buildMQClientId
    after changeInstanceNameToPID); ``#n`` is added when another instance of this
    process already has that id (a second NameServer list with the DEFAULT name)."""
    name = str(os.getpid()) if config.instance_name == DEFAULT_INSTANCE_NAME else config.instance_name
    base = f"{config.client_ip}@{name}"
    client_id, n = base, 1
    while client_id in taken:
        client_id, n = f"{base}#{n}", n + 1
    return client_id


class _Triggered(Service):
    """Call ``fn`` every ``interval_s`` and also as soon as `trigger` is called."""

    def __init__(self, name: str, interval_s: float, fn: Callable[[], Awaitable[None]]) -> None:
        super().__init__()
        self.name = name
        self.interval_s = interval_s
        self._fn = fn
        self._wake = asyncio.Event()

    def trigger(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while not self.stopping:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if self.stopping:
                return
            try:
                await self._fn()
            except Exception:
                log.exception("%s failed", self.name)

    async def stop(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        self._wake.set()
        await super().stop(timeout_s)


InstanceKey = tuple[int, tuple[str, ...], str, object, object]


class ClientInstance:
    """Shared connections, routes and background services of one client identity."""

    _registry: ClassVar[dict[InstanceKey, ClientInstance]] = {}

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        self.loop = asyncio.get_running_loop()
        self.remoting = RemotingClient(self._handlers(), tls=config.tls)
        self.api = AdminAPI(self.remoting, NameServers(config.namesrv_addrs), config.request_timeout_ms,
                            config.language, config.credentials)
        self.routes = RouteCache(self.api)
        self.producers: dict[str, Any] = {}
        self.consumers: dict[str, ConsumerImpl] = {}
        self._users = 0
        self._started = False
        self._closed = False
        self._key: InstanceKey | None = None
        self._rebalance = _Triggered("rebalance", config.rebalance_interval_ms / 1000, self.rebalance_all)
        self._services: list[Service] = [
            Periodic("route-refresh", config.poll_namesrv_interval_ms / 1000, self.refresh_routes),
            Periodic("heartbeat", config.heartbeat_broker_interval_ms / 1000, self.heartbeat_all_brokers),
            Periodic("persist-offsets", config.persist_consumer_offset_interval_ms / 1000, self.persist_all_offsets),
            self._rebalance,
        ]
        self._heartbeat_lock = asyncio.Lock()
        self._greeted: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.routes.add_listener(self._on_route_changed)

    # ------------------------------------------------------------ registry

    @classmethod
    def get(cls, config: ClientConfig) -> ClientInstance:
        """The instance of this loop for ``config``'s NameServers and instance name (made if new)."""
        loop = asyncio.get_running_loop()
        key = (id(loop), config.namesrv_addrs, config.instance_name, config.credentials, config.tls)
        inst = cls._registry.get(key)
        if inst is not None and inst.loop is loop and not inst._closed:
            return inst
        for stale in [k for k, i in cls._registry.items() if i._closed or i.loop.is_closed()]:
            del cls._registry[stale]
        taken = {i.client_id for i in cls._registry.values()}
        inst = cls(config, build_client_id(config, taken))
        inst._key = key
        cls._registry[key] = inst
        return inst

    @property
    def started(self) -> bool:
        return self._started and not self._closed

    # ------------------------------------------------------------- members

    def register_producer(self, group: str, impl: object) -> None:
        self._check_group(group, self.producers, "producer")
        self.producers[group] = impl

    def register_consumer(self, group: str, impl: ConsumerImpl) -> None:
        self._check_group(group, self.consumers, "consumer")
        self.consumers[group] = impl

    def _check_group(self, group: str, table: dict[str, Any], kind: str) -> None:
        if self._closed:
            raise ClientStateError("the client instance is shut down")
        problem = group_error(group)
        if problem:
            raise ClientStateError(f"{kind} group: {problem}")
        if group in table:
            raise ClientStateError(
                f"a {kind} of group {group!r} already runs in client {self.client_id}; "
                "give the second one another instance_name")

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_everywhere(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_everywhere(consumer_group=group)

    async def _unregister_everywhere(self, *, producer_group: str | None = None,
                                     consumer_group: str | None = None) -> None:
        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group=producer_group,
                                                 consumer_group=consumer_group)
            except Exception as exc:  # noqa: BLE001 - best effort; the broker expires us anyway
                log.info("unregistering %s from %s failed: %s", producer_group or consumer_group, addr, exc)

        await asyncio.gather(*(one(a) for a in self.routes.broker_addrs(masters_only=False)))

    # ----------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Count one more user; the first one starts the services."""
        if self._closed:
            raise ClientStateError("the client instance is shut down")
        self._users += 1
        if not self._started:
            self._started = True
            for service in self._services:
                service.start()
            log.info("client %s started (NameServers %s)", self.client_id, ";".join(self.config.namesrv_addrs))

    async def shutdown(self) -> None:
        """Count one user less; the last one unregisters every group and closes the connections."""
        if self._closed or self._users == 0:
            return
        self._users -= 1
        if self._users > 0:
            return
        self._closed = True
        if self._key is not None and self._registry.get(self._key) is self:
            del self._registry[self._key]
        await asyncio.gather(*(s.stop(SHUTDOWN_TIMEOUT_S) for s in self._services))
        for task in list(self._tasks):
            task.cancel()
        for group in list(self.consumers):
            await self.unregister_consumer(group)
        for group in list(self.producers):
            await self.unregister_producer(group)
        await self.remoting.close()
        log.info("client %s shut down", self.client_id)

    # ------------------------------------------------------------ services

    async def refresh_routes(self) -> None:
        subscribed = {s.topic for c in self.consumers.values() for s in c.consumer_data().subscription_data_set}
        await self.routes.refresh(subscribed)

    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            self.client_id,
            tuple(ProducerData(g) for g in sorted(self.producers)),
            tuple(c.consumer_data() for _, c in sorted(self.consumers.items())),
        )

    async def heartbeat_all_brokers(self) -> None:
        """HEART_BEAT to every known broker; a broker that fails is logged and skipped."""
        if not self.producers and not self.consumers:
            return
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            addrs = self.routes.broker_addrs(masters_only=not self.consumers)
            results = await asyncio.gather(*(self.api.heartbeat(a, data) for a in addrs), return_exceptions=True)
        for addr, result in zip(addrs, results):
            if isinstance(result, Exception):
                log.warning("heartbeat to %s failed: %s", addr, result)
            else:
                self._greeted.add(addr)

    def _on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        """Greet brokers this client has not sent a heartbeat to yet, so that they know
        its groups before the next periodic heartbeat (transaction check-backs need it)."""
        addrs = set(self.routes.broker_addrs(masters_only=not self.consumers))
        if addrs - self._greeted and self.started and (self.producers or self.consumers):
            self.spawn(self.heartbeat_all_brokers())

    def spawn(self, coro: Awaitable[None]) -> None:
        """Run ``coro`` in the background; it is kept referenced until it ends."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def persist_all_offsets(self) -> None:
        for group, consumer in list(self.consumers.items()):
            try:
                await consumer.persist_offsets()
            except Exception:
                log.exception("persisting the offsets of %s failed", group)

    async def rebalance_all(self) -> None:
        for group, consumer in list(self.consumers.items()):
            try:
                await consumer.rebalance()
            except Exception:
                log.exception("rebalancing %s failed", group)

    def rebalance_now(self) -> None:
        """Wake the rebalance service (a consumer started, or the broker says the group changed)."""
        self._rebalance.trigger()

    # ------------------------------------------------- requests from brokers

    def _handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_consumer_ids_changed,
            RequestCode.CHECK_TRANSACTION_STATE: self._on_check_transaction_state,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self._on_get_running_info,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._on_reset_offset,
        }

    def _on_consumer_ids_changed(self, conn: Connection, req: RemotingCommand) -> None:
        group = NotifyConsumerIdsChangedRequestHeader.from_ext(req.ext_fields).consumer_group
        log.info("broker %s says the consumers of %s changed: rebalancing", conn.peer_addr, group)
        self.rebalance_now()

    def _on_check_transaction_state(self, conn: Connection, req: RemotingCommand) -> Awaitable[None] | None:
        header = CheckTransactionStateRequestHeader.from_ext(req.ext_fields)
        messages = decode_stored_messages(req.body)
        if not messages:
            log.warning("CHECK_TRANSACTION_STATE from %s carries no message", conn.peer_addr)
            return None
        msg = messages[0]
        producer = self.producers.get(msg.properties.get(Prop.PGROUP, ""))
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.warning("CHECK_TRANSACTION_STATE from %s for group %s: no transaction producer of it here",
                        conn.peer_addr, msg.properties.get(Prop.PGROUP))
            return None
        result = check(conn.peer_addr, msg, header)
        return _no_answer(result) if inspect.isawaitable(result) else None

    def _on_get_running_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext(req.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None:
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"the consumer group {header.consumer_group} is not running in {self.client_id}")
        info = consumer.running_info()
        props = {**info.properties, CLIENT_VERSION_PROP: str(SKIFF_VERSION)}
        return req.response(body=ConsumerRunningInfo(props, info.subscription_set, info.mq_table,
                                                     info.status_table, info.jstack).to_json())

    def _on_reset_offset(self, conn: Connection, req: RemotingCommand) -> Awaitable[None] | None:
        header = ResetOffsetRequestHeader.from_ext(req.ext_fields)
        consumer = self.consumers.get(header.group)
        if consumer is None or not req.body:
            return None
        offsets = dict(ResetOffsetBody.from_json(req.body).offset_table)
        log.info("broker %s resets %s on %s to %d queue offsets", conn.peer_addr, header.group, header.topic,
                 len(offsets))
        return _no_answer(consumer.reset_offset(header.topic, offsets))


async def _no_answer(awaitable: Awaitable[Any]) -> None:
    """Run a handler's work and send nothing back (these broker requests take no reply)."""
    await awaitable
