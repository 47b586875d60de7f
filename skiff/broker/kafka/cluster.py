"""The Kafka cluster a broker's Kafka door describes: every broker group of its RocketMQ
cluster as one Kafka node, and each topic's partitions numbered across the groups.

**Where the nodes come from.** The NameServers already know every broker group and its
master (GET_BROKER_CLUSTER_INFO). The Kafka listener of a broker is advertised in the
NameServers' KV config, namespace ``SKIFF_KAFKA_LISTENERS``, keyed by the broker's
remoting address (``host:port``, the address its registration names), valued by its
Kafka listener's ``host:port``. So a broker group's node is its master's entry: after a
failover the new master's own listener, with no change to what brokers register or to
the routes RocketMQ clients read (a Java NameServer keeps KV configs the same way). Each
broker puts its entry when its listener starts and again every registration period (a
NameServer restarted without a kvConfigPath forgets it), and deletes it on a clean stop:
`skiff.broker.namesrv_kv.NamesrvEntry`, as the gRPC door keeps its endpoints.

**Partition numbering.** A topic's partitions are its queues in the order of the broker
groups' names: the groups holding the topic (the NameServers' route, with this broker's
own queues as its topic table has them) sorted by ``brokerName``, each contributing its
read queues in queue-id order. With ``broker-a`` holding 4 queues and ``broker-b`` 2,
partitions 0–3 are broker-a's queues 0–3, partitions 4–5 broker-b's queues 0–1. The
numbering is stable while the groups and their queue counts are; growing an earlier
group's queues (or adding a group whose name sorts first) renumbers the partitions after
it, so grow a topic spread over groups in its last group (docs/kafka.md).

What the NameServers said is used for `KAFKA_CLUSTER_VIEW_TTL_MS`, then asked again in the
background while requests go on with it (a NameServer that is down never holds a Produce
or a Fetch, except the first look at a topic); when none answers, the last answer stays in
use, and before any answer the view is this broker group alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.broker.namesrv_kv import NamesrvEntry
from skiff.common.errors import SkiffError
from skiff.common.limits import KAFKA_CLUSTER_VIEW_TTL_MS
from skiff.common.record import parse_host_port
from skiff.common.service import Periodic
from skiff.protocol.bodies.route import ClusterInfo, TopicRouteData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import GetRouteInfoRequestHeader
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

KAFKA_LISTENERS = "SKIFF_KAFKA_LISTENERS"
"""The NameServers' KV namespace of Kafka listeners: broker remoting address → Kafka host:port."""
LOOKUP_TIMEOUT_MS = 3_000


@dataclass(frozen=True, slots=True)
class Node:
    """A broker group as a Kafka node: its master's Kafka listener."""

    node_id: int
    host: str
    port: int


def node_id(broker_name: str) -> int:
    """A broker group's Kafka node id: stable across restarts and failovers (the group's
    name, not its master's address), the same on every broker of the cluster."""
    return zlib.crc32(broker_name.encode()) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Layout:
    """A topic's partitions: (broker name, queue count) per broker group, by name."""

    groups: tuple[tuple[str, int], ...] = ()

    @property
    def count(self) -> int:
        return sum(n for _, n in self.groups)

    def locate(self, partition: int) -> tuple[str, int] | None:
        """The broker group and queue id of ``partition``; None past the last."""
        if partition < 0:
            return None
        for name, n in self.groups:
            if partition < n:
                return name, partition
            partition -= n
        return None

    def partition(self, broker_name: str, queue_id: int) -> int | None:
        base = 0
        for name, n in self.groups:
            if name == broker_name:
                return base + queue_id if 0 <= queue_id < n else None
            base += n
        return None


@dataclass(frozen=True, slots=True)
class Place:
    """Where a partition is: a queue of this broker group (``local``) or of another, whose
    master's remoting address is ``master`` (None while the NameServers name none)."""

    broker_name: str
    queue_id: int
    local: bool
    master: str | None = None


@dataclass(frozen=True, slots=True)
class Members:
    """The cluster's broker groups as the NameServers last said: Kafka nodes, and the
    masters' remoting addresses (where a coordinator sends another group's offsets)."""

    nodes: dict[str, Node]
    masters: dict[str, str]


class ClusterView:
    def __init__(self, client: RemotingClient, namesrv_addrs: tuple[str, ...], cluster_name: str,
                 broker_name: str, broker_addr: Callable[[], str], own_node: Callable[[], Node | None],
                 own_queues: Callable[[str], int | None], is_master: Callable[[], bool],
                 now: Callable[[], float] = time.monotonic) -> None:
        """``own_node``: this group's node as this broker knows it (a master itself; a slave
        its master's host at its own Kafka port, the fallback when the NameServers have no
        entry for the master). ``own_queues``: a topic's read queue count here, None when
        this broker does not have it."""
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.entry = NamesrvEntry(client, namesrv_addrs, KAFKA_LISTENERS, broker_addr)
        self.own_node = own_node
        self.own_queues = own_queues
        self.is_master = is_master
        self.now = now
        self._members: tuple[float, Members] | None = None
        self._routes: dict[str, tuple[float, dict[str, int]]] = {}
        self._layouts: dict[str, tuple[tuple[float, dict[str, int]], int | None, Layout]] = {}
        """`known_layout`'s last layout per topic, with the route answer and queue count it was made from."""
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._periodic: Periodic | None = None

    # -- advertising this broker's listener ------------------------------------------

    def start(self, listener: Callable[[], str], interval_s: float) -> None:
        """Put ``listener`` (host:port) in every NameServer's KV config now and every ``interval_s``."""
        async def advertise() -> None:
            await self.advertise(listener())
        self._periodic = Periodic("kafka-advertise", interval_s, advertise, initial_delay_s=0)
        self._periodic.start()

    async def stop(self) -> None:
        for task in list(self._refreshing.values()):
            task.cancel()
        await asyncio.gather(*self._refreshing.values(), return_exceptions=True)
        if self._periodic is not None:
            await self._periodic.stop()
            self._periodic = None
            await self.entry.delete()

    async def advertise(self, listener: str) -> None:
        await self.entry.put(listener)

    # -- reading the cluster ----------------------------------------------------------

    async def members(self) -> Members:
        """Every broker group of this cluster whose master serves Kafka, by name."""
        if self._members is None:
            await self._refresh_members()
        elif self._stale(self._members[0]):
            self._refresh_later("", self._refresh_members)
        assert self._members is not None
        return self._with_own(self._members[1])

    async def _refresh_members(self) -> None:
        fresh = await self._ask_members()
        previous = self._members
        if fresh is None:  # none answered: the last answer, asked again later
            fresh = Members({}, {}) if previous is None else previous[1]
        self._members = (self.now(), fresh)

    def _stale(self, at: float) -> bool:
        return self.now() - at > KAFKA_CLUSTER_VIEW_TTL_MS / 1000

    def _refresh_later(self, key: str, refresh: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Ask again in the background (one question per key at a time): a request goes on
        with the last answer instead of waiting for the NameServers, or for their timeout."""
        if key in self._refreshing:
            return
        task = asyncio.get_running_loop().create_task(refresh())
        self._refreshing[key] = task
        task.add_done_callback(lambda _: self._refreshing.pop(key, None))

    def _with_own(self, members: Members) -> Members:
        own = self.own_node()
        if own is None or (not self.is_master() and self.broker_name in members.nodes):
            return members  # a slave names what the NameServers say its master listens on
        return Members({**members.nodes, self.broker_name: own}, members.masters)

    async def _ask_members(self) -> Members | None:
        for addr in self.namesrv_addrs:
            info = await self._call(addr, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
            if info is None or info.code != ResponseCode.SUCCESS or not info.body:
                continue
            listeners = await self.entry.table_at(addr)  # the same NameServer's: one view of the cluster
            try:
                cluster = ClusterInfo.from_json(info.body)
                return _members(cluster, self.cluster_name, listeners or {})
            except (SkiffError, ValueError) as exc:
                log.warning("NameServer %s answered a cluster view that does not decode: %s", addr, exc)
        return None

    async def layout(self, topic: str) -> Layout:
        """``topic``'s partitions across the broker groups of this cluster."""
        layout = self.known_layout(topic)
        if layout is None:
            await self._refresh_route(topic)
            layout = self.known_layout(topic)
            assert layout is not None
        return layout

    def known_layout(self, topic: str) -> Layout | None:
        """`layout` without waiting: None when the NameServers were not asked about ``topic``
        yet (a stale answer is used, and asked again in the background, as `layout` does)."""
        cached = self._routes.get(topic)
        if cached is None:
            return None
        if self._stale(cached[0]):
            self._refresh_later("topic:" + topic, lambda: self._refresh_route(topic))
        own = self.own_queues(topic)
        made = self._layouts.get(topic)
        if made is not None and made[0] is cached and made[1] == own:
            return made[2]  # the same answer and queues: the layout made from them (a Produce asks per read)
        groups = dict(cached[1])
        if own is None:
            groups.pop(self.broker_name, None)
        else:
            groups[self.broker_name] = own
        layout = Layout(tuple(sorted(groups.items())))
        self._layouts[topic] = (cached, own, layout)
        return layout

    async def _refresh_route(self, topic: str) -> None:
        fresh = await self._ask_route(topic)
        previous = self._routes.get(topic)
        if fresh is None:
            fresh = {} if previous is None else previous[1]
        self._routes[topic] = (self.now(), fresh)

    async def _ask_route(self, topic: str) -> dict[str, int] | None:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext())
        for addr in self.namesrv_addrs:
            resp = await self._call(addr, cmd)
            if resp is None:
                continue
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                return {}  # the NameServer does not know the topic
            try:
                route = TopicRouteData.from_json(resp.body)
            except (SkiffError, ValueError) as exc:
                log.warning("NameServer %s answered a route of %s that does not decode: %s", addr, topic, exc)
                continue
            ours = {b.broker_name for b in route.broker_datas if b.cluster == self.cluster_name}
            return {q.broker_name: q.read_queue_nums for q in route.queue_datas if q.broker_name in ours}
        return None

    async def place(self, topic: str, partition: int) -> Place | None:
        """Where ``partition`` of ``topic`` is; None past the topic's last partition. A topic
        no broker group has yet is taken as this group's (its queue of the same number, which
        a Produce may auto-create)."""
        layout = await self.layout(topic)
        if not layout.groups:
            return Place(self.broker_name, partition, True)
        where = layout.locate(partition)
        if where is None:
            return None
        name, queue_id = where
        if name == self.broker_name:
            return Place(name, queue_id, True)
        return Place(name, queue_id, False, (await self.members()).masters.get(name))

    def forget(self, topic: str) -> None:
        """Ask the NameServers again at the next look (the topic changed here)."""
        self._routes.pop(topic, None)
        self._layouts.pop(topic, None)

    async def _call(self, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            return await self.client.invoke(addr, cmd, LOOKUP_TIMEOUT_MS)
        except SkiffError as exc:
            log.info("NameServer %s did not answer the Kafka door's %s: %s", addr, RequestCode(cmd.code).name, exc)
            return None


def _members(cluster: ClusterInfo, cluster_name: str, listeners: Mapping[str, str]) -> Members:
    nodes: dict[str, Node] = {}
    masters: dict[str, str] = {}
    for name in cluster.cluster_addr_table.get(cluster_name, ()):
        data = cluster.broker_addr_table.get(name)
        master = None if data is None else data.master_addr
        if master is None:
            continue
        masters[name] = master
        listener = listeners.get(master)
        if listener:
            host, port = parse_host_port(listener)
            nodes[name] = Node(node_id(name), host, port)
    return Members(nodes, masters)


def coordinator(group: str, nodes: dict[str, Node]) -> Node | None:
    """The node that coordinates ``group``: the same on every broker that sees the same
    groups (hashed over the broker names in order, as Kafka hashes a group to a partition
    of its offsets topic)."""
    if not nodes:
        return None
    names = sorted(nodes)
    return nodes[names[zlib.crc32(group.encode()) % len(names)]]
