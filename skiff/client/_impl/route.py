"""The route cache: topic routes from the NameServers, the queues to send to
and to read from, and the address of every broker group the routes name.

Publish queues (RocketMQ's topicRouteData2TopicPublishInfo): an order topic's
``orderTopicConf`` ("broker-a:4;broker-b:4") lists them; otherwise each
writable QueueData whose group has a master gives queues 0..writeQueueNums-1,
groups sorted by name. Subscribe queues: each readable QueueData gives
0..readQueueNums-1. A topic no NameServer knows is sent through the template
topic TBW102 (§2.4 of the protocol notes): its layout, capped at
``default_topic_queue_nums`` queues per group, and a broker that auto-creates
topics creates it on the first send.

Routes are fetched on first use, refreshed every ``poll_namesrv_interval_ms``
by the client instance, and again on the next use after a caller marks a
topic stale (a failed send).

A topic whose route exists but whose writable queues all belong to groups with
no master now (the NameServer lists only slaves, or nothing, for brokerId 0: the
master died and its successor is not elected or registered yet) raises
`NoMasterError`, which says so, instead of falling back to TBW102 and claiming the
topic does not exist. `writable_publish_info` and `master_for` wait for a master:
they fetch the route again after 50 ms, then twice as long each time up to 500 ms,
or as soon as another fetch (another send, the periodic refresh) stores a changed
route, until one appears or the caller's time runs out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from skiff.client._impl.api import UNREACHABLE, MQClientAPI
from skiff.client.errors import NameServerUnavailableError, NoBrokerError, NoMasterError, NoRouteError
from skiff.common.message import MessageQueue
from skiff.common.names import TBW102
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.bodies.topic import Perm

log = logging.getLogger(__name__)

MASTER_ID = 0
DEFAULT_TOPIC_QUEUE_NUMS = 4
"""Queues per broker group a topic auto-created through TBW102 gets (RocketMQ's defaultTopicQueueNums)."""

ROUTE_WAIT_FIRST_S = 0.05
ROUTE_WAIT_MAX_S = 0.5
"""While no group of a topic has a master, its route is fetched again after 50 ms, then
twice as long each time up to 500 ms (sooner when another fetch stores a change)."""

RouteListener = Callable[[str, TopicRouteData], None]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """Where a producer may send ``topic``: ``queues`` in route order."""

    topic: str
    queues: tuple[MessageQueue, ...]
    order_topic: bool
    route: TopicRouteData
    auto_create: bool = False
    """True when borrowed from TBW102: the topic does not exist yet."""


def _writable(perm: int) -> bool:
    return bool(perm & Perm.WRITE)


def _readable(perm: int) -> bool:
    return bool(perm & Perm.READ)


def publish_queues(topic: str, route: TopicRouteData) -> tuple[tuple[MessageQueue, ...], bool]:
    """The queues to send ``topic`` to and whether it is an order topic."""
    if route.order_topic_conf:
        out = []
        for item in route.order_topic_conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.strip().isdigit():
                out += [MessageQueue(topic, name.strip(), i) for i in range(int(count))]
        return tuple(out), True
    masters = {b.broker_name for b in route.broker_datas if b.master_addr}
    queues = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if _writable(qd.perm) and qd.broker_name in masters:
            queues += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)]
    return tuple(queues), False


def masterless_groups(route: TopicRouteData) -> dict[str, str]:
    """The groups with writable queues in ``route`` that have no master now, each with what the
    route lists for it instead ("slaves only", "no broker")."""
    datas = {b.broker_name: b for b in route.broker_datas}
    out = {}
    for qd in route.queue_datas:
        if not _writable(qd.perm) or qd.write_queue_nums <= 0:
            continue
        data = datas.get(qd.broker_name)
        if data is None or not data.broker_addrs:
            out[qd.broker_name] = "no broker"
        elif not data.master_addr:
            out[qd.broker_name] = "slaves only"
    return out


def subscribe_queues(topic: str, route: TopicRouteData) -> tuple[MessageQueue, ...]:
    """The queues to read ``topic`` from, by group name then queue id."""
    return tuple(
        MessageQueue(topic, qd.broker_name, i)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name) if _readable(qd.perm)
        for i in range(qd.read_queue_nums)
    )


def borrow_route(template: TopicRouteData, queue_nums: int) -> TopicRouteData:
    """TBW102's route with each group's queue counts capped at ``queue_nums`` (the auto-create layout)."""
    def capped(qd: QueueData) -> QueueData:
        n = min(queue_nums, qd.read_queue_nums)
        return dataclasses.replace(qd, read_queue_nums=n, write_queue_nums=n)

    return dataclasses.replace(template, queue_datas=tuple(capped(qd) for qd in template.queue_datas),
                               order_topic_conf=None)


class RouteCache:
    """Routes by topic and broker addresses by group name, shared by a client instance."""

    def __init__(self, api: MQClientAPI, *, default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS) -> None:
        self._api = api
        self._default_queue_nums = default_topic_queue_nums
        self._routes: dict[str, TopicRouteData] = {}
        self._publish: dict[str, TopicPublishInfo] = {}
        self._brokers: dict[str, BrokerData] = {}
        self._masterless: set[str] = set()
        """Groups whose latest BrokerData lists no master."""
        self._stale: set[str] = set()
        self._fetching: dict[str, asyncio.Future[TopicRouteData | None]] = {}
        self._listeners: list[RouteListener] = []
        self._changes: dict[str, asyncio.Future[None]] = {}
        """Per topic, resolved when a fetch stores a changed route (what a waiter for a master awaits)."""
        self._versions: dict[str, int] = {}
        """Per topic, how many times a fetch stored a changed route."""

    # ------------------------------------------------------------- lookups

    @property
    def topics(self) -> list[str]:
        """Topics with a cached route or publish info (what the periodic refresh covers)."""
        return sorted(set(self._routes) | set(self._publish))

    def cached_route(self, topic: str) -> TopicRouteData | None:
        return self._routes.get(topic)

    def add_listener(self, listener: RouteListener) -> None:
        """Call ``listener(topic, route)`` whenever a fetched route differs from the cached one."""
        self._listeners.append(listener)

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route (fetched if not cached); `NoRouteError` when none exists."""
        route = self._routes.get(topic)
        if route is None or topic in self._stale:
            route = await self._update_or_keep(topic, route is not None) or route
        if route is None:
            raise NoRouteError(topic)
        return route

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """Where to send ``topic``: its route, else TBW102's layout; `NoMasterError` when the
        groups of either have no master now, `NoRouteError` when there is neither."""
        info = self._publish.get(topic)
        if info is not None and topic not in self._stale and info.queues:
            return info
        await self._update_or_keep(topic, info is not None and bool(info.queues))
        info = self._publish.get(topic)
        if info is not None and info.queues:
            return info
        if info is not None and not info.auto_create:
            missing = masterless_groups(info.route)
            if missing:  # the topic exists; its masters are gone for now (not a reason to use TBW102)
                raise NoMasterError(topic, missing)
        template = await self._api.get_topic_route(TBW102)
        if template is None:
            raise NoRouteError(topic, "it does not exist and no broker auto-creates topics (no TBW102 route)")
        self._add_brokers(template.broker_datas)
        borrowed = borrow_route(template, self._default_queue_nums)
        queues, _ = publish_queues(topic, borrowed)
        if not queues:
            missing = masterless_groups(borrowed)
            if missing:
                raise NoMasterError(topic, missing, exists=False)
            raise NoRouteError(topic, "it does not exist and TBW102 has no writable queue")
        info = TopicPublishInfo(topic, queues, False, template, auto_create=True)
        self._publish[topic] = info
        return info

    async def writable_publish_info(self, topic: str, timeout_s: float) -> TopicPublishInfo:
        """`publish_info` with only the queues whose group has a master now (an order topic
        lists its queues whatever their group's state). While there are none (a failover),
        wait for a master as the module says; `NoMasterError` once ``timeout_s`` has passed."""
        info = self.writable_now(topic)
        if info is not None:
            return info  # the usual case, without the coroutines below

        async def writable() -> TopicPublishInfo:
            info = await self.publish_info(topic)
            if not self._masterless:
                return info
            queues = tuple(q for q in info.queues if self.master_addr(q.broker_name))
            if len(queues) == len(info.queues):
                return info
            if not queues:
                missing = {q.broker_name: self._group_state(q.broker_name) for q in info.queues}
                raise NoMasterError(topic, missing, exists=not info.auto_create)
            return dataclasses.replace(info, queues=queues)

        return await self.wait_while_masterless(topic, writable, timeout_s)

    def writable_now(self, topic: str) -> TopicPublishInfo | None:
        """`writable_publish_info`'s answer when it has nothing to fetch or wait for (the usual
        case: a fresh route and a master in every group), else None: then await that method.
        Lets a send take its queue without awaiting a coroutine."""
        info = self._publish.get(topic)
        if info is not None and info.queues and topic not in self._stale and not self._masterless:
            return info
        return None

    async def master_for(self, topic: str, broker_name: str, timeout_s: float) -> str:
        """The address of ``broker_name``'s master, waiting (as `writable_publish_info` does)
        while the routes list none; `NoMasterError` once ``timeout_s`` has passed."""
        async def master() -> str:
            if self.master_addr(broker_name) is None:
                await self.publish_info(topic)
            return self.require_master(broker_name)

        return await self.wait_while_masterless(topic, master, timeout_s)

    async def wait_route_change(self, topic: str, timeout_s: float) -> bool:
        """Fetch ``topic``'s route again until it differs from the cached one, with the backoff of
        a wait for a master, for at most ``timeout_s``; whether it changed. For a send whose
        master just failed: the route soon says so (no master, or another one) when it died."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        delay = ROUTE_WAIT_FIRST_S
        before = self._routes.get(topic)
        while True:
            version = self._versions.get(topic, 0)
            try:
                if await self.update(topic) != before:
                    return True
            except Exception as exc:  # noqa: BLE001 - the caller goes on with the route it has
                log.debug("fetching the route of %s failed: %s", topic, exc)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            if await self._changed(topic, version, min(delay, remaining)):
                return True
            delay = min(delay * 2, ROUTE_WAIT_MAX_S)

    async def wait_while_masterless(self, topic: str, get: Callable[[], Awaitable[T]], timeout_s: float) -> T:
        """``await get()``, again after each wait for ``topic``'s route to change while it raises
        `NoMasterError`; that error (saying how long it waited) once ``timeout_s`` has passed."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        delay = ROUTE_WAIT_FIRST_S
        while True:
            version = self._versions.get(topic, 0)
            try:
                return await get()
            except NoMasterError as exc:
                waited = loop.time() - started
                remaining = timeout_s - waited
                if remaining <= 0:
                    raise exc.after_waiting(round(waited * 1000)) from None
                if delay == ROUTE_WAIT_FIRST_S:
                    log.info("waiting up to %d ms for a master: %s", remaining * 1000, exc)
            await self._changed(topic, version, min(delay, remaining))
            delay = min(delay * 2, ROUTE_WAIT_MAX_S)
            self.mark_stale(topic)

    async def _changed(self, topic: str, version: int, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a fetch to store a changed route of ``topic`` (at once
        when one did since the caller saw ``version``)."""
        if self._versions.get(topic, 0) != version:
            return True
        loop = asyncio.get_running_loop()
        change = self._changes.get(topic)
        if change is None or change.done() or change.get_loop() is not loop:
            change = self._changes[topic] = loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(change), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False

    def _group_state(self, broker_name: str) -> str:
        data = self._brokers.get(broker_name)
        return "no broker" if data is None or not data.broker_addrs else "slaves only"

    async def subscribe_queues(self, topic: str) -> tuple[MessageQueue, ...]:
        """The readable queues of ``topic``; `NoRouteError` when it has no route."""
        return subscribe_queues(topic, await self.route(topic))

    def mark_stale(self, topic: str) -> None:
        """Fetch the topic's route again on its next use (after a send failed)."""
        self._stale.add(topic)

    # ------------------------------------------------------------ brokers

    def broker_names(self) -> list[str]:
        return sorted(self._brokers)

    def broker_data(self, broker_name: str) -> BrokerData | None:
        return self._brokers.get(broker_name)

    def master_addr(self, broker_name: str) -> str | None:
        data = self._brokers.get(broker_name)
        return data.master_addr if data is not None else None

    def require_master(self, broker_name: str) -> str:
        """The master's address of a group; `NoMasterError` when the routes list the group
        without one, `NoBrokerError` when they do not name it."""
        addr = self.master_addr(broker_name)
        if addr is None:
            if broker_name in self._brokers:
                raise NoMasterError(None, {broker_name: self._group_state(broker_name)})
            raise NoBrokerError(f"no master address is known for broker {broker_name!r}")
        return addr

    def find_broker_addr(self, broker_name: str, broker_id: int = MASTER_ID, *,
                         only_this_broker: bool = False) -> str:
        """The address of ``broker_id`` in the group, else (unless ``only_this_broker``) any
        member's, the master first (RocketMQ's findBrokerAddressInSubscribe)."""
        data = self._brokers.get(broker_name)
        addrs = data.broker_addrs if data is not None else {}
        addr = addrs.get(broker_id)
        if addr is None and not only_this_broker and addrs:
            addr = addrs[min(addrs)]
        if addr is None:
            raise NoBrokerError(f"no address is known for broker {broker_name!r} (id {broker_id})")
        return addr

    def broker_addrs(self, *, masters_only: bool) -> list[str]:
        """Every known broker address (masters only, for a client without consumers)."""
        out = []
        for data in self._brokers.values():
            out += [addr for bid, addr in sorted(data.broker_addrs.items()) if bid == MASTER_ID or not masters_only]
        return out

    def broker_name_of(self, addr: str) -> str | None:
        return next((d.broker_name for d in self._brokers.values() if addr in d.broker_addrs.values()), None)

    # ------------------------------------------------------------ updates

    async def update(self, topic: str) -> TopicRouteData | None:
        """Fetch ``topic``'s route now (concurrent callers share one request); None if it has none."""
        pending = self._fetching.get(topic)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(topic))
            self._fetching[topic] = pending
            pending.add_done_callback(lambda _: self._fetching.pop(topic, None))
        return await asyncio.shield(pending)

    async def _update_or_keep(self, topic: str, have_cached: bool) -> TopicRouteData | None:
        """`update`, except that a cached route outlives NameServers that cannot be reached."""
        try:
            return await self.update(topic)
        except (NameServerUnavailableError, *UNREACHABLE) as exc:
            if not have_cached:
                raise
            log.warning("keeping the cached route of %s: %s", topic, exc)
            return None

    async def refresh(self, topics: Iterable[str] = ()) -> None:
        """Fetch every cached topic's route and ``topics`` (the periodic refresh); failures are logged."""
        for topic in sorted(set(self.topics) | set(topics)):
            try:
                await self.update(topic)
            except Exception as exc:  # noqa: BLE001 - one topic's failure must not stop the others
                log.warning("refreshing the route of %s failed: %s", topic, exc)

    async def _fetch(self, topic: str) -> TopicRouteData | None:
        route = await self._api.get_topic_route(topic)
        self._stale.discard(topic)
        if route is None:
            return None
        self._store(topic, route)
        return route

    def _store(self, topic: str, route: TopicRouteData) -> None:
        changed = self._routes.get(topic) != route
        self._routes[topic] = route
        self._add_brokers(route.broker_datas)
        queues, order = publish_queues(topic, route)
        self._publish[topic] = TopicPublishInfo(topic, queues, order, route)
        if changed:
            self._versions[topic] = self._versions.get(topic, 0) + 1
            change = self._changes.pop(topic, None)
            if change is not None and not change.done():
                change.set_result(None)
            for listener in self._listeners:
                try:
                    listener(topic, route)
                except Exception:
                    log.exception("route listener failed for %s", topic)

    def _add_brokers(self, datas: Iterable[BrokerData]) -> None:
        for data in datas:
            self._brokers[data.broker_name] = data
            if data.master_addr:
                self._masterless.discard(data.broker_name)
            else:
                self._masterless.add(data.broker_name)

    def forget_topic(self, topic: str) -> None:
        self._routes.pop(topic, None)
        self._publish.pop(topic, None)
        self._stale.discard(topic)
