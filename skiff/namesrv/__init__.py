"""The NameServer: an in-memory route table (brokers, clusters, topic queues,
liveness) served over the remoting protocol. See docs/namesrv.md."""

from skiff.namesrv.config import NamesrvConfig
from skiff.namesrv.route_table import RegisterResult, RemovedBroker, RouteTable
from skiff.namesrv.server import NamesrvServer

__all__ = ["NamesrvConfig", "NamesrvServer", "RegisterResult", "RemovedBroker", "RouteTable"]
