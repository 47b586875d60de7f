"""A broker's entry in a namespace of the NameServers' KV config: what the broker serves besides
remoting, keyed by its remoting address (the address its registration names), so that other
brokers find it from a route's master address.

The NameServers keep KV configs as RocketMQ's do (PUT_KV_CONFIG, GET_KV_CONFIG,
DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE) and never talk to each other, so the entry is put
on every NameServer, again every registration period (a NameServer restarted without a
kvConfigPath forgets it), and deleted at a clean stop. A put that would change nothing is
skipped (one GET instead of a write). Each door that listens on its own port has its own
namespace and this one way to keep it: the gRPC endpoints of `skiff.broker.grpc.routes`
(``SKIFF_GRPC_ENDPOINTS``) and the Kafka listeners of `skiff.broker.kafka.cluster`
(``SKIFF_KAFKA_LISTENERS``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from skiff.common.errors import SkiffError
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.namesrv import (
    GetKVListByNamespaceRequestHeader,
    KVConfigKeyHeader,
    PutKVConfigRequestHeader,
)
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

KV_TIMEOUT_MS = 3_000
"""A NameServer's answer to a KV request (as to a route lookup)."""


class NamesrvEntry:
    """This broker's entry in ``namespace``, and every broker's (`table`)."""

    def __init__(self, client: RemotingClient, namesrv_addrs: tuple[str, ...], namespace: str,
                 broker_addr: Callable[[], str]) -> None:
        """``broker_addr``: this broker's remoting address, the key (read when used: a port 0 is
        known only once the broker listens)."""
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.namespace = namespace
        self.broker_addr = broker_addr

    async def put(self, value: str) -> None:
        """This broker's entry is ``value`` on every NameServer that answers."""
        key = self.broker_addr()
        for addr in self.namesrv_addrs:
            got = await self._call(addr, RequestCode.GET_KV_CONFIG, KVConfigKeyHeader(self.namespace, key).to_ext())
            if got is not None and got.code == ResponseCode.SUCCESS and (got.ext_fields or {}).get("value") == value:
                continue
            await self._call(addr, RequestCode.PUT_KV_CONFIG,
                             PutKVConfigRequestHeader(self.namespace, key, value).to_ext())

    async def delete(self) -> None:
        key = self.broker_addr()
        for addr in self.namesrv_addrs:
            await self._call(addr, RequestCode.DELETE_KV_CONFIG, KVConfigKeyHeader(self.namespace, key).to_ext())

    async def table(self) -> dict[str, str] | None:
        """Every broker's entry (remoting address -> value) from the first NameServer that
        answers; None when none does (an empty namespace is an empty table)."""
        for addr in self.namesrv_addrs:
            table = await self.table_at(addr)
            if table is not None:
                return table
        return None

    async def table_at(self, addr: str) -> dict[str, str] | None:
        """Every broker's entry as the NameServer at ``addr`` has it (so a caller can read it
        beside another answer of the same NameServer); None when it does not answer, or
        answers a table that does not decode."""
        got = await self._call(addr, RequestCode.GET_KVLIST_BY_NAMESPACE,
                               GetKVListByNamespaceRequestHeader(self.namespace).to_ext())
        if got is None:
            return None
        if got.code != ResponseCode.SUCCESS or not got.body:
            return {}
        try:
            return dict(KVTable.from_json(got.body).table)
        except (SkiffError, ValueError) as exc:
            log.warning("NameServer %s answered a %s table that does not decode: %s", addr, self.namespace, exc)
            return None

    async def _call(self, addr: str, code: RequestCode, ext: dict[str, str]) -> RemotingCommand | None:
        try:
            return await self.client.invoke(addr, RemotingCommand.request(code, ext), KV_TIMEOUT_MS)
        except SkiffError as exc:
            log.info("NameServer %s did not answer %s of %s: %s", addr, code.name, self.namespace, exc)
            return None
