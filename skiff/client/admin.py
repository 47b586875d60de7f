"""The admin API: `AsyncAdmin` and the blocking `Admin` (RocketMQ's MQAdminExt, the
questions mqadmin asks). The `skiff` admin commands are a thin layer over it.

Cluster-wide operations go to every master of a cluster (or of every cluster
when none is named); topic operations go to the masters its route names.

    async with AsyncAdmin("127.0.0.1:9876") as admin:
        await admin.create_topic("Orders", queue_nums=8)
        for q in await admin.topic_status("Orders"): print(q.mq, q.max_offset)
        progress = await admin.consumer_progress("orders-consumer")
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from skiff.client.admin_users import USER_ADMIN_METHODS, UserAdmin
from skiff.client._impl.config import DEFAULT_INSTANCE_NAME, ClientConfig, client_config_for
from skiff.client.credentials import Credentials
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.lifecycle import AsyncClient
from skiff.client._impl.producer_impl import check_topic
from skiff.client._impl.pull_api import Puller
from skiff.client._impl.route import publish_queues
from skiff.client.admin_results import (
    BrokerCompaction,
    BrokerTier,
    BrokerInfo,
    BrokerTimer,
    CancelScheduledResult,
    ClientConnection,
    ConsumerConnections,
    ConsumerProgress,
    QueueProgress,
    QueueStatus,
    ScheduledCancel,
)
from skiff.client.blocking import BlockingClient, mirror
from skiff.client.errors import (
    ClientError,
    ClientStateError,
    MessageValidationError,
    NoOffsetsError,
    NoRouteError,
)
from skiff.client.results import PullStatus
from skiff.common.errors import DecodeError
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.common.message import MessageQueue
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import dlq_topic, group_error, retry_topic
from skiff.common.stored_message import StoredMessage
from skiff.protocol.bodies.admin import GroupRetryPolicy, SubscriptionGroupConfig
from skiff.protocol.bodies.route import ClusterInfo, TopicRouteData
from skiff.protocol.bodies.timer import CancelScheduledBody, overall_status
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.group_attributes import patch as attribute_patch
from skiff.protocol.bodies.topic import Perm, TopicConfig
from skiff.protocol.bodies.topic_attributes import changes_text, parse_attribute_changes
from skiff.protocol.errors import ConsumerNotOnlineError, ResponseError, TopicNotExistError
from skiff.protocol.headers.query import QueryMessageRequestHeader

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
"""The NameServer KV namespace holding order topics' queue layouts."""
DEFAULT_QUEUE_NUMS = 8
"""Queues per broker a new topic gets (mqadmin updateTopic's default)."""
TOPIC_PERMS = (int(Perm.WRITE), int(Perm.READ), int(Perm.READ | Perm.WRITE))
"""The permissions a topic can be given: write only, read only, both (0 would make it unusable)."""
ADMIN_GROUP = "TOOLS_CONSUMER"
"""The group admin pulls name (RocketMQ's tools use the same)."""
QUERY_MAX_NUM = 64
ROUTE_WAIT_S = 5.0
"""How long `AsyncAdmin.create_topic` waits for the NameServers' route to show a change."""
ROUTE_POLL_S = 0.05
TIME_MAX_MS = 2**63 - 1


class AsyncAdmin(UserAdmin, AsyncClient):
    """Cluster, topic, group, offset and message administration over the remoting protocol."""

    def __init__(self, namesrv_addr: str = "", *, instance_name: str = DEFAULT_INSTANCE_NAME,
                 client_config: ClientConfig | None = None, credentials: Credentials | None = None) -> None:
        self.client_config = client_config_for(namesrv_addr, instance_name, client_config, credentials)
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        if self._instance is not None:
            raise ClientStateError("the admin is already started")
        self._instance = ClientInstance.get(self.client_config)
        await self._instance.start()

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.shutdown()

    @property
    def _inst(self) -> ClientInstance:
        if self._instance is None:
            raise ClientStateError("the admin is not started; call start() first")
        return self._instance

    # ------------------------------------------------------------- cluster

    async def cluster_info(self) -> ClusterInfo:
        return await self._inst.api.get_cluster_info()

    async def brokers(self, cluster: str | None = None, *, runtime: bool = True) -> list[BrokerInfo]:
        """Every broker (of ``cluster``), with its runtime table when ``runtime`` and it answers."""
        info = await self.cluster_info()
        rows = [
            (name, data.cluster, bid, addr)
            for name in self._group_names(info, cluster)
            for data in [info.broker_addr_table[name]]
            for bid, addr in sorted(data.broker_addrs.items())
        ]

        async def one(name: str, cl: str, bid: int, addr: str) -> BrokerInfo:
            if not runtime:
                return BrokerInfo(cl, name, bid, addr)
            try:
                return BrokerInfo(cl, name, bid, addr, await self._inst.api.get_broker_runtime_info(addr))
            except Exception as exc:  # noqa: BLE001 - a broker that does not answer is still listed
                return BrokerInfo(cl, name, bid, addr, error=str(exc))

        return list(await asyncio.gather(*(one(*row) for row in rows)))

    def _group_names(self, info: ClusterInfo, cluster: str | None) -> list[str]:
        if cluster is None:
            return sorted(info.broker_addr_table)
        if cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise ClientError(f"no cluster named {cluster!r} is registered (known: {known})")
        return sorted(info.cluster_addr_table[cluster])

    async def _masters(self, cluster: str | None = None, broker_addr: str | None = None) -> dict[str, str]:
        """Broker name -> master address: the one at ``broker_addr``, or every master of ``cluster``."""
        info = await self.cluster_info()
        masters = {n: info.broker_addr_table[n].master_addr for n in self._group_names(info, cluster)}
        found = {n: a for n, a in masters.items() if a}
        if broker_addr is not None:
            found = {n: a for n, a in found.items() if a == broker_addr} or {"?": broker_addr}
        if not found:
            raise ClientError("no master broker is registered" + (f" in cluster {cluster!r}" if cluster else ""))
        return found

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        return await self._inst.api.get_broker_runtime_info(addr)

    # -------------------------------------------------------------- topics

    async def create_topic(self, topic: str, *, queue_nums: int = DEFAULT_QUEUE_NUMS,
                           read_queue_nums: int | None = None, write_queue_nums: int | None = None,
                           perm: int = Perm.READ | Perm.WRITE, order: bool = False, cluster: str | None = None,
                           broker_addr: str | None = None, wait_route_s: float = ROUTE_WAIT_S,
                           attributes: Mapping[str, str] | None = None) -> list[str]:
        """Create or update ``topic`` on one broker or on every master (of ``cluster``); returns
        the addresses written. An order topic created on a cluster also gets its queue layout
        in the NameServers' ORDER_TOPIC_CONFIG, so producers see it as ordered.

        Brokers tell the NameServers about the change right after it; this waits up to
        ``wait_route_s`` until the route shows it, so the next call finds the topic
        (0: do not wait; a route still old after the wait is logged, not raised).

        ``attributes`` sets topic attributes (``{"cleanup.policy": "COMPACTION"}``); those
        not named keep their values on an update.
        """
        check_topic(topic)
        try:
            parse_attribute_changes(changes_text(attributes or {}))
        except BodyError as exc:
            raise MessageValidationError(str(exc)) from None
        read, write = read_queue_nums or queue_nums, write_queue_nums or queue_nums
        if not (1 <= read <= QUEUES_PER_TOPIC_MAX and 1 <= write <= QUEUES_PER_TOPIC_MAX):
            raise MessageValidationError(f"queue counts must be 1 to {QUEUES_PER_TOPIC_MAX}")
        if perm not in TOPIC_PERMS:
            raise MessageValidationError("perm must be 2 (write), 4 (read) or 6 (both)")
        masters = await self._masters(cluster, broker_addr)
        config = TopicConfig(topic, read, write, perm, order=order, attributes=dict(attributes or {}))
        await asyncio.gather(*(self._inst.api.create_topic(a, config) for a in masters.values()))
        if order and broker_addr is None:
            layout = ";".join(f"{name}:{write}" for name in sorted(masters))
            await self._each_namesrv(lambda ns: self._inst.api.put_kv_config(ns, ORDER_TOPIC_CONFIG, topic, layout))
        expected = {name: (read, write, perm) for name in masters if name != "?"}
        if wait_route_s > 0 and expected and not await self._route_shows(topic, expected, wait_route_s):
            log.warning("the route of %s does not show the change after %.1f s", topic, wait_route_s)
        return list(masters.values())

    async def _route_shows(self, topic: str, expected: dict[str, tuple[int, int, int]], wait_s: float) -> bool:
        """Poll the route until each named broker has the expected (read, write, perm), or ``wait_s`` ends."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            route = await self._inst.api.get_topic_route(topic)
            have = {q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm) for q in (route.queue_datas
                                                                                         if route else ())}
            if all(have.get(name) == want for name, want in expected.items()):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(ROUTE_POLL_S)

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from every master (of ``cluster``) and from every NameServer."""
        masters = await self._masters(cluster)
        await asyncio.gather(*(self._inst.api.delete_topic_in_broker(a, topic) for a in masters.values()))
        await self._each_namesrv(lambda ns: self._inst.api.delete_topic_in_namesrv(ns, topic, cluster))
        try:
            await self._each_namesrv(lambda ns: self._inst.api.delete_kv_config(ns, ORDER_TOPIC_CONFIG, topic))
        except ResponseError as exc:
            log.debug("no order config to delete for %s: %s", topic, exc)
        self._inst.routes.forget_topic(topic)
        return list(masters.values())

    async def _each_namesrv(self, call: Any) -> None:
        await asyncio.gather(*(call(ns) for ns in self._inst.api.namesrvs.addrs))

    async def topic_list(self) -> list[str]:
        return sorted(await self._inst.api.get_topic_list())

    async def topic_route(self, topic: str) -> TopicRouteData:
        route = await self._inst.api.get_topic_route(topic)
        if route is None:
            raise NoRouteError(topic)
        return route

    async def writable_queues(self, topic: str) -> tuple[MessageQueue, ...]:
        """The queues a producer sends ``topic`` to now, in the order its selectors see them
        (an order topic's from its orderTopicConf; else each group with a master, by name)."""
        queues, _ = publish_queues(topic, await self.topic_route(topic))
        return queues

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per queue: min and max offsets and the last store time, from each master of the route."""
        route = await self.topic_route(topic)
        addrs = [b.master_addr for b in route.broker_datas if b.master_addr]
        tables = await asyncio.gather(*(self._inst.api.get_topic_stats(a, topic) for a in addrs))
        rows = [QueueStatus(mq, o.min_offset, o.max_offset, o.last_update_timestamp)
                for table in tables for mq, o in table.offset_table.items()]
        return sorted(rows, key=lambda r: (r.mq.broker_name, r.mq.queue_id))

    async def compaction(self, topic: str, *, run: bool = False, timeout_ms: int = 600_000) -> list[BrokerCompaction]:
        """The compaction state of ``topic`` on each master of its route (Skiff brokers);
        ``run`` compacts every queue now first. A broker that cannot answer is listed with
        ``error``."""
        route = await self.topic_route(topic)
        masters = {b.broker_name: b.master_addr for b in route.broker_datas if b.master_addr}

        async def one(name: str, addr: str) -> BrokerCompaction:
            try:
                return BrokerCompaction(name, addr, await self._inst.api.compaction(addr, topic, run=run,
                                                                                    timeout_ms=timeout_ms))
            except Exception as exc:  # noqa: BLE001 - a broker that does not answer is still listed
                return BrokerCompaction(name, addr, error=str(exc))

        return list(await asyncio.gather(*(one(n, a) for n, a in sorted(masters.items()))))

    async def tier(self, topic: str, *, upload: bool = False, timeout_ms: int = 600_000) -> list[BrokerTier]:
        """The tier state of ``topic`` on each master of its route (Skiff brokers); ``upload``
        uploads what is sealed first. A broker that cannot answer is listed with ``error``."""
        route = await self.topic_route(topic)
        masters = sorted((b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr)
        answers = await asyncio.gather(*(self._inst.api.tier(addr, topic, upload=upload, timeout_ms=timeout_ms)
                                         for _, addr in masters), return_exceptions=True)
        return [BrokerTier(name, addr, error=str(a)) if isinstance(a, BaseException) else BrokerTier(name, addr, a)
                for (name, addr), a in zip(masters, answers)]

    # ------------------------------------------------------ consumer groups

    async def create_consumer_group(self, group: str, *, cluster: str | None = None, broker_addr: str | None = None,
                                    retry_max_times: int = 16, retry_queue_nums: int = 1,
                                    consume_broadcast_enable: bool = True, consume_enable: bool = True,
                                    consume_from_min_enable: bool = True, consume_message_orderly: bool = False,
                                    broker_id: int = 0, which_broker_when_consume_slowly: int = 1,
                                    notify_consumer_ids_changed_enable: bool = True,
                                    group_retry_policy: GroupRetryPolicy | None = None,
                                    attributes: Mapping[str, str | None] | None = None) -> list[str]:
        """Create the subscription group on one broker or every master (of ``cluster``), or replace
        its settings there: each setting of ``mqadmin updateSubGroup``, RocketMQ's defaults for
        those not given. ``consume_message_orderly`` makes POP and 5.x (gRPC) consumers of the
        group receive each queue in order, one batch at a time; ``group_retry_policy`` is the
        backoff those consumers retry with (default: the broker's delay levels). ``attributes``
        sets RocketMQ 5's group attributes named (a value None removes one; those not named are
        kept, as the broker applies them as a patch): 5.5's lite ones, e.g.
        ``{"lite.bind.topic": "Orders", "lite.sub.client.quota": "100"}``
        (skiff.protocol.bodies.group_attributes); an unknown name or bad value is refused here."""
        _check_group(group)
        body_attributes = _attribute_patch(attributes or {})
        config = SubscriptionGroupConfig(
            group, consume_enable=consume_enable, consume_from_min_enable=consume_from_min_enable,
            consume_broadcast_enable=consume_broadcast_enable, retry_queue_nums=retry_queue_nums,
            retry_max_times=retry_max_times, broker_id=broker_id,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly,
            notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
            consume_message_orderly=consume_message_orderly,
            group_retry_policy=group_retry_policy or GroupRetryPolicy(), attributes=body_attributes)
        masters = await self._masters(cluster, broker_addr)
        await asyncio.gather(*(self._inst.api.create_subscription_group(a, config) for a in masters.values()))
        return list(masters.values())

    async def update_consumer_group(self, group: str, *, cluster: str | None = None, broker_addr: str | None = None,
                                    **changes: Any) -> list[str]:
        """Change only the settings named (the keyword arguments of `create_consumer_group`),
        keeping each master's others (a master without the group starts from the defaults);
        ``attributes`` changes only the attributes it names."""
        _check_group(group)
        unknown = set(changes) - _GROUP_SETTINGS
        if unknown:
            raise MessageValidationError(f"not a consumer group setting: {', '.join(sorted(unknown))} "
                                         f"(settings: {', '.join(sorted(_GROUP_SETTINGS))})")
        changes["attributes"] = _attribute_patch(changes.get("attributes") or {})
        masters = await self._masters(cluster, broker_addr)

        async def one(addr: str) -> None:
            table = (await self._inst.api.get_all_subscription_groups(addr)).subscription_group_table
            current = table.get(group) or SubscriptionGroupConfig(group)
            await self._inst.api.create_subscription_group(addr, dataclasses.replace(current, **changes))
        await asyncio.gather(*(one(a) for a in masters.values()))
        return list(masters.values())

    async def consumer_group_configs(self, group: str, cluster: str | None = None) -> dict[str, SubscriptionGroupConfig]:
        """The group's settings on each master (of ``cluster``) that has it, by broker address."""
        _check_group(group)
        masters = await self._masters(cluster)
        wrappers = await asyncio.gather(*(self._inst.api.get_all_subscription_groups(a) for a in masters.values()))
        return {addr: w.subscription_group_table[group] for addr, w in zip(masters.values(), wrappers)
                if group in w.subscription_group_table}

    async def delete_consumer_group(self, group: str, *, cluster: str | None = None,
                                    remove_offset: bool = True) -> list[str]:
        """Delete the group (and its offsets) from every master, and its retry and DLQ topics."""
        _check_group(group)
        masters = await self._masters(cluster)
        await asyncio.gather(*(self._inst.api.delete_subscription_group(a, group, remove_offset=remove_offset)
                               for a in masters.values()))
        for topic in (retry_topic(group), dlq_topic(group)):
            if await self._inst.api.get_topic_route(topic) is not None:
                await self.delete_topic(topic, cluster=cluster)
        return list(masters.values())

    async def consumer_groups(self, cluster: str | None = None) -> list[str]:
        """The subscription groups every master (of ``cluster``) knows, sorted: the ones created
        by admin and the ones consumers registered by subscribing."""
        masters = await self._masters(cluster)
        wrappers = await asyncio.gather(*(self._inst.api.get_all_subscription_groups(a) for a in masters.values()))
        return sorted({name for w in wrappers for name in w.subscription_group_table})

    async def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        """Per queue the group consumes (of ``topic``): broker offset, committed offset, lag.
        `NoOffsetsError` when no broker has an offset of the group (of ``topic``)."""
        _check_group(group)
        masters = await self._masters()

        async def one(addr: str) -> Any:
            try:
                return await self._inst.api.get_consume_stats(addr, group, topic)
            except TopicNotExistError:
                return None

        stats = [s for s in await asyncio.gather(*(one(a) for a in masters.values())) if s is not None]
        rows = [QueueProgress(mq, w.broker_offset, w.consumer_offset, w.last_timestamp, w.pull_offset, w.in_flight)
                for s in stats for mq, w in s.offset_table.items()]
        if not rows:  # as Java's examineConsumeStats: a group nobody knows is not "no lag"
            raise NoOffsetsError(f"consumer group {group} has no offsets" + (f" on {topic}" if topic else "")
                              + ": it does not exist or has not consumed anything")
        rows.sort(key=lambda r: (r.mq.topic, r.mq.broker_name, r.mq.queue_id))
        return ConsumerProgress(group, tuple(rows), sum(s.consume_tps for s in stats))

    async def consumer_connections(self, group: str) -> ConsumerConnections:
        """The group's live clients (from the first master that knows them); `ConsumerNotOnlineError` if none."""
        _check_group(group)
        last: Exception | None = None
        for addr in (await self._masters()).values():
            try:
                body = await self._inst.api.get_consumer_connection_list(addr, group)
            except ConsumerNotOnlineError as exc:
                last = exc
                continue
            conns = tuple(ClientConnection(c.client_id, c.client_addr, c.language.name, c.version)
                          for c in body.connection_set)
            return ConsumerConnections(group, conns, dict(body.subscription_table), body.consume_type,
                                       body.message_model, body.consume_from_where)
        raise last or ConsumerNotOnlineError(f"no consumer of group {group} is connected")

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *,
                                   force: bool = True) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (without ``force``, only backwards); live consumers are told.
        Returns the new offset of each queue."""
        _check_group(group)
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        for data in route.broker_datas:
            if not data.master_addr:
                continue
            try:
                out.update(await self._inst.api.invoke_broker_to_reset_offset(
                    data.master_addr, topic, group, timestamp_ms, force=force))
            except ConsumerNotOnlineError:
                out.update(await self._reset_offline(data.master_addr, data.broker_name, route, group, topic,
                                                     timestamp_ms))
        return out

    async def _reset_offline(self, addr: str, broker_name: str, route: TopicRouteData, group: str, topic: str,
                             timestamp_ms: int) -> dict[MessageQueue, int]:
        """A broker that only resets live groups (Java's): commit the searched offsets directly."""
        out = {}
        for qd in route.queue_datas:
            if qd.broker_name != broker_name:
                continue
            for i in range(qd.read_queue_nums):
                mq = MessageQueue(topic, broker_name, i)
                out[mq] = await self._inst.api.search_offset(addr, mq, timestamp_ms)
                await self._inst.api.update_consumer_offset(addr, group, mq, out[mq])
        return out

    # ------------------------------------------------------------ offsets

    async def _master_of(self, mq: MessageQueue) -> str:
        routes = self._inst.routes
        if routes.master_addr(mq.broker_name) is None:
            await routes.update(mq.topic)
        return routes.require_master(mq.broker_name)

    async def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of ``mq`` gets (its message count, retention aside)."""
        return await self._inst.api.get_max_offset(await self._master_of(mq), mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._inst.api.get_min_offset(await self._master_of(mq), mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms``."""
        return await self._inst.api.search_offset(await self._master_of(mq), mq, timestamp_ms)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return await self._inst.api.get_earliest_msg_store_time(await self._master_of(mq), mq)

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        _check_group(group)
        await self._inst.api.update_consumer_offset(await self._master_of(mq), group, mq, offset)

    async def fetch_consumer_offset(self, group: str, mq: MessageQueue) -> int | None:
        """The group's committed offset of ``mq``; None when it has none."""
        _check_group(group)
        return await self._inst.api.query_consumer_offset(await self._master_of(mq), group, mq)

    # ------------------------------------------------------------ messages

    async def message_by_id(self, msg_id: str, topic: str | None = None) -> StoredMessage:
        """A message by the broker's offsetMsgId, or by the client's UNIQ_KEY (which needs ``topic``).

        An id whose decoded store address is a known broker is read there
        (VIEW_MESSAGE_BY_ID); any other is looked up as a UNIQ_KEY.
        """
        msg_id = msg_id.strip().upper()
        addr = await self._store_addr_of(msg_id)
        if addr is not None:
            return await self._inst.api.view_message(addr, decode_offset_msg_id(msg_id).physical_offset)
        if topic is None:
            raise MessageValidationError(f"{msg_id} is not an offsetMsgId of a known broker; "
                                         "give the topic to look it up as a message key (UNIQ_KEY)")
        found = [m for m in await self._query(topic, msg_id, unique=True) if m.msg_id == msg_id]
        if not found:
            raise ClientError(f"no message with id {msg_id} in topic {topic!r}")
        return min(found, key=lambda m: m.store_timestamp)

    async def _store_addr_of(self, msg_id: str) -> str | None:
        try:
            decoded = decode_offset_msg_id(msg_id)
        except DecodeError:
            return None
        info = await self.cluster_info()
        known = {a for d in info.broker_addr_table.values() for a in d.broker_addrs.values()}
        return decoded.addr if decoded.addr in known else None

    async def messages_by_key(self, topic: str, key: str, *, begin_ms: int = 0, end_ms: int = TIME_MAX_MS,
                              max_num: int = QUERY_MAX_NUM) -> list[StoredMessage]:
        """Messages of ``topic`` with ``key`` among their KEYS, stored between the times (oldest
        first: by store time, then CommitLog order on one broker; messages stored in the same
        millisecond on different brokers have no order between them)."""
        found = [m for m in await self._query(topic, key, begin_ms=begin_ms, end_ms=end_ms, max_num=max_num)
                 if key in m.keys]
        return sorted(found, key=lambda m: (m.store_timestamp, m.store_host, m.commit_log_offset))[:max_num]

    async def _query(self, topic: str, key: str, *, unique: bool = False, begin_ms: int = 0,
                     end_ms: int = TIME_MAX_MS, max_num: int = QUERY_MAX_NUM) -> list[StoredMessage]:
        route = await self.topic_route(topic)
        header = QueryMessageRequestHeader(topic, key, max_num, begin_ms, end_ms, unique)
        addrs = [b.master_addr for b in route.broker_datas if b.master_addr]
        batches = await asyncio.gather(*(self._inst.api.query_message(a, header) for a in addrs))
        return [m for batch in batches for m in batch]

    async def message_at(self, mq: MessageQueue, offset: int) -> StoredMessage | None:
        """The message at ``offset`` in ``mq``, or None when there is none there."""
        puller = Puller(self._inst.api, self._inst.routes)
        result = await puller.pull(mq, offset, 1, group=ADMIN_GROUP)
        if result.status is not PullStatus.FOUND:
            return None
        return next((m for m in result.messages if m.queue_offset == offset), None)

    # --------------------------------------------------- timer (Skiff brokers)

    async def timer_slots(self, *, cluster: str | None = None, broker_addr: str | None = None) -> list[BrokerTimer]:
        """Each master's (of ``cluster``, or the one at ``broker_addr``) scheduled messages per
        timer slot, and its timer's counters. A broker that cannot answer (a RocketMQ broker
        has no such request) is listed with ``error``."""
        masters = await self._masters(cluster, broker_addr)

        async def one(name: str, addr: str) -> BrokerTimer:
            try:
                body = await self._inst.api.get_timer_slots(addr)
            except Exception as exc:  # noqa: BLE001 - a broker that does not answer is still listed
                return BrokerTimer(name, addr, error=str(exc))
            return BrokerTimer(name, addr, body.slot_ms, body.slots, body.stats)

        return list(await asyncio.gather(*(one(n, a) for n, a in sorted(masters.items()))))

    async def cancel_scheduled(self, msg_id: str) -> CancelScheduledResult:
        """Cancel a message scheduled for later (a delay level or a delivery time) by the id its
        send returned: ``msg_id`` (UNIQ_KEY; every scheduled copy, retries included) or
        ``offset_msg_id``. An offsetMsgId is cancelled on the broker it names, a UNIQ_KEY on
        every master. Raises when no broker could be asked; the result says what happened."""
        msg_id = msg_id.strip().upper()
        if not msg_id:
            raise MessageValidationError("give the id of the scheduled message to cancel")
        store_addr = await self._store_addr_of(msg_id)
        masters = await self._masters()
        targets = {n: a for n, a in masters.items() if store_addr in (None, a)} or {"?": str(store_addr)}
        answers = await asyncio.gather(*(self._inst.api.cancel_scheduled_message(a, msg_id)
                                         for a in targets.values()), return_exceptions=True)
        errors = [a for a in answers if isinstance(a, BaseException)]
        if len(errors) == len(answers):
            raise errors[0]
        bodies = {n: a for n, a in zip(targets, answers) if isinstance(a, CancelScheduledBody)}
        outcomes = tuple(ScheduledCancel(n, o.timer_id, o.slot_start_ms, o.due_ms, o.status)
                         for n, body in bodies.items() for o in body.outcomes)
        failures = tuple(f"{n}: {a}" for n, a in zip(targets, answers) if isinstance(a, BaseException))
        return CancelScheduledResult(msg_id, overall_status([b.status for b in bodies.values()]), outcomes, failures)


def _attribute_patch(changes: Mapping[str, str | None]) -> dict[str, str]:
    """The body's patch of group attributes (the broker applies it to the group's current ones)."""
    try:
        return attribute_patch(changes)
    except BodyError as exc:
        raise MessageValidationError(str(exc)) from None


_GROUP_SETTINGS = frozenset(f.name for f in dataclasses.fields(SubscriptionGroupConfig)) - {"group_name"}


def _check_group(group: str) -> None:
    problem = group_error(group)
    if problem:
        raise MessageValidationError(f"consumer group: {problem}")


@mirror(AsyncAdmin, "cluster_info", "brokers", "broker_runtime_info", "create_topic", "delete_topic",
        "topic_list", "topic_route", "writable_queues", "topic_status", "create_consumer_group",
        "update_consumer_group", "consumer_group_configs", "delete_consumer_group", "consumer_groups", "consumer_progress", "consumer_connections", "reset_offset_by_time", "max_offset",
        "min_offset", "search_offset", "earliest_msg_store_time", "update_consumer_offset", "fetch_consumer_offset",
        "message_by_id", "messages_by_key", "message_at", "timer_slots", "cancel_scheduled", "compaction",
        "tier", *USER_ADMIN_METHODS)
class Admin(BlockingClient[AsyncAdmin]):
    """The blocking `AsyncAdmin`: same constructor, same methods."""

    def __init__(self, namesrv_addr: str = "", **options: Any) -> None:
        super().__init__(lambda: AsyncAdmin(namesrv_addr, **options))
