"""Where a topic's queues are, for gRPC routes and assignments: every broker group that holds
the topic, each with the gRPC endpoint of its master.

The NameServers' route (GET_ROUTEINFO_BY_TOPIC, asked for each QueryRoute and
QueryAssignment) says which broker groups hold the topic and their masters'
addresses; the gRPC endpoint of another broker is its host with **this** broker's
``grpcServerPort`` (brokers of one cluster serve gRPC on the same port, as proxies
do on 8081). So a client whose access point is broker A sends to and receives from
broker B at B's own endpoint, and each broker serves only its own queues. Without
NameServers, or when they do not know the topic yet, the route is this broker's
own queues.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from skiff.broker.topics import TopicConfigManager
from skiff.common.errors import SkiffError
from skiff.common.record import parse_host_port
from skiff.protocol.bodies.route import TopicRouteData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import GetRouteInfoRequestHeader
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

LOOKUP_TIMEOUT_MS = 3_000


class BrokerQueues(NamedTuple):
    broker_name: str
    host: str
    """The master's host; its gRPC endpoint is host:grpcServerPort."""
    read_queue_nums: int
    write_queue_nums: int
    perm: int


RouteLookup = Callable[[str], Awaitable[TopicRouteData | None]]


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


class Routes:
    def __init__(self, topics: TopicConfigManager, broker_name: str, own_host: str, lookup: RouteLookup,
                 is_slave: Callable[[], bool] = lambda: False) -> None:
        """``is_slave``: whether this broker is a slave now (controller mode changes it at run time)."""
        self.topics = topics
        self.broker_name = broker_name
        self.own_host = own_host
        self.lookup = lookup
        self.is_slave = is_slave

    async def brokers(self, topic: str) -> list[BrokerQueues]:
        """The broker groups holding ``topic`` (this broker's own queues as it knows them).

        A slave names its master's host for its own group (as the NameServers know it), so a
        client whose access point reaches a slave first sends to the master, not to a broker
        that refuses its sends; a slave whose master the NameServers do not know names itself."""
        route = await self.lookup(topic)
        out = []
        own_host = self.own_host
        if route is not None:
            masters = {b.broker_name: b.master_addr for b in route.broker_datas}
            master = masters.get(self.broker_name)
            if master and self.is_slave():
                own_host = parse_host_port(master)[0]
            for q in route.queue_datas:
                addr = masters.get(q.broker_name)
                if q.broker_name != self.broker_name and addr:
                    out.append(BrokerQueues(q.broker_name, parse_host_port(addr)[0], q.read_queue_nums,
                                            q.write_queue_nums, q.perm))
        tc = self.topics.get(topic)
        if tc is not None:
            out.insert(0, BrokerQueues(self.broker_name, own_host, tc.read_queue_nums, tc.write_queue_nums,
                                       tc.perm))
        return out
