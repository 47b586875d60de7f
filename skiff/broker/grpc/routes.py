"""Where a topic's queues are, for gRPC routes and assignments: every broker group that holds
the topic, each with the gRPC endpoint of its master.

The NameServers' route (GET_ROUTEINFO_BY_TOPIC, asked for each QueryRoute and
QueryAssignment) says which broker groups hold the topic and their masters' remoting
addresses. Each broker puts its own gRPC endpoint in the NameServers' KV config
(namespace ``SKIFF_GRPC_ENDPOINTS``, keyed by its remoting address: `skiff.broker.namesrv_kv`)
when its gRPC door starts and every registration period, so a master's gRPC endpoint is
its entry; brokers of one host (`skiff up --brokers 2`) serve gRPC on different ports, and
this is how routes and lite forwarding (skiff.broker.grpc.lite_peers) tell them apart. A
master without an entry (a broker that does not advertise, or whose entry is not there
yet) is named at its host with **this** broker's ``grpcServerPort``, the convention of a
cluster whose brokers serve gRPC on one port (as proxies do on 8081). So a client whose
access point is broker A sends to and receives from broker B at B's own endpoint, and
each broker serves only its own queues. Without NameServers, or when they do not know the
topic yet, the route is this broker's own queues.

The table of endpoints is read again after `GRPC_ENDPOINTS_CACHE_S`, and at once when a
route names a master the table lacks (a broker that just joined).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from skiff.broker.namesrv_kv import NamesrvEntry
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock, SystemClock
from skiff.common.errors import SkiffError
from skiff.common.limits import GRPC_ENDPOINTS_CACHE_S
from skiff.common.record import parse_host_port
from skiff.protocol.bodies.route import TopicRouteData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import GetRouteInfoRequestHeader
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT_MS = 3_000
GRPC_ENDPOINTS = "SKIFF_GRPC_ENDPOINTS"
"""The NameServers' KV namespace of gRPC endpoints: broker remoting address -> its gRPC host:port."""


class BrokerQueues(NamedTuple):
    broker_name: str
    host: str
    """The master's gRPC host (its advertised one, else its remoting host)."""
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    grpc_port: int
    """The master's gRPC port (its advertised one, else this broker's grpcServerPort)."""


RouteLookup = Callable[[str], Awaitable[TopicRouteData | None]]
EndpointsLookup = Callable[[], Awaitable[dict[str, str] | None]]
"""Every advertised gRPC endpoint, remoting address -> host:port; None when no NameServer answers."""


def namesrv_lookup(client: RemotingClient, namesrv_addrs: tuple[str, ...]) -> RouteLookup:
    """Ask the NameServers in turn for a topic's route; None when none knows it."""
    async def lookup(topic: str) -> TopicRouteData | None:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext())
        for addr in namesrv_addrs:
            try:
                resp = await client.invoke(addr, cmd, LOOKUP_TIMEOUT_MS)
            except SkiffError as exc:
                log.info("route of %s from NameServer %s failed: %s", topic, addr, exc)
                continue
            return TopicRouteData.from_json(resp.body) if resp.code == ResponseCode.SUCCESS and resp.body else None
        return None
    return lookup


class NamesrvRoutes:
    """The NameServers as the gRPC door uses them: routes, and the gRPC endpoints brokers
    advertise (this broker's among them)."""

    def __init__(self, client: RemotingClient, namesrv_addrs: tuple[str, ...], broker_addr: Callable[[], str]) -> None:
        self.lookup = namesrv_lookup(client, namesrv_addrs)
        self.entry = NamesrvEntry(client, namesrv_addrs, GRPC_ENDPOINTS, broker_addr)

    async def endpoints(self) -> dict[str, str] | None:
        return await self.entry.table()


class Routes:
    def __init__(self, topics: TopicConfigManager, broker_name: str, own_host: str, lookup: RouteLookup,
                 is_slave: Callable[[], bool] = lambda: False, endpoints: EndpointsLookup | None = None,
                 clock: Clock | None = None) -> None:
        """``is_slave``: whether this broker is a slave now (controller mode changes it at run time);
        ``endpoints``: the advertised gRPC endpoints (None: every master at this broker's port)."""
        self.topics = topics
        self.broker_name = broker_name
        self.own_host = own_host
        self.lookup = lookup
        self.is_slave = is_slave
        self.endpoints = endpoints
        self.clock = clock or SystemClock()
        self.grpc_port = 0
        """This broker's gRPC port (the server sets it once it listens)."""
        self._table: tuple[float, dict[str, str]] | None = None

    async def brokers(self, topic: str) -> list[BrokerQueues]:
        """The broker groups holding ``topic`` (this broker's own queues as it knows them).

        A slave names its master's host for its own group (as the NameServers know it), so a
        client whose access point reaches a slave first sends to the master, not to a broker
        that refuses its sends; a slave whose master the NameServers do not know names itself."""
        route = await self.lookup(topic)
        out = []
        own = (self.own_host, self.grpc_port)
        if route is not None:
            masters = {b.broker_name: b.master_addr for b in route.broker_datas}
            master = masters.get(self.broker_name)
            if master and self.is_slave():
                own = await self.grpc_endpoint(master)
            for q in route.queue_datas:
                addr = masters.get(q.broker_name)
                if q.broker_name != self.broker_name and addr:
                    host, port = await self.grpc_endpoint(addr)
                    out.append(BrokerQueues(q.broker_name, host, q.read_queue_nums, q.write_queue_nums, q.perm, port))
        tc = self.topics.get(topic)
        if tc is not None:
            out.insert(0, BrokerQueues(self.broker_name, own[0], tc.read_queue_nums, tc.write_queue_nums,
                                       tc.perm, own[1]))
        return out

    async def grpc_endpoint(self, remoting_addr: str) -> tuple[str, int]:
        """The gRPC (host, port) of the broker at ``remoting_addr``: its advertised endpoint, else
        its host with this broker's port."""
        table = await self._endpoints(remoting_addr)
        advertised = table.get(remoting_addr)
        if advertised:
            try:
                return parse_host_port(advertised)
            except ValueError:
                log.warning("the gRPC endpoint %r advertised for %s is not host:port", advertised, remoting_addr)
        return parse_host_port(remoting_addr)[0], self.grpc_port

    async def _endpoints(self, wanted: str) -> dict[str, str]:
        """The table, read again when it is old or lacks ``wanted``."""
        if self.endpoints is None:
            return {}
        now = self.clock.monotonic()
        cached = self._table
        if cached is not None and now - cached[0] < GRPC_ENDPOINTS_CACHE_S and wanted in cached[1]:
            return cached[1]
        fresh = await self.endpoints()
        if fresh is None:  # no NameServer answered: the last table stands
            return cached[1] if cached is not None else {}
        self._table = (now, fresh)
        return fresh
