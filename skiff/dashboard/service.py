"""What the dashboard shows and does, as plain JSON-ready dicts, over the client's admin API.

`Dashboard` owns one admin, one producer and one pull client (all of
`skiff.client`), so the pages and the JSON API have no second path to a broker.
Message questions live in `skiff.dashboard.messages`; the in/out rates behind the
live charts in `skiff.dashboard.rates`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from skiff.client import ClientConfig
from skiff.client.admin import ADMIN_GROUP, DEFAULT_QUEUE_NUMS, AsyncAdmin
from skiff.client.admin_results import BrokerInfo, ConsumerProgress
from skiff.client.credentials import Credentials
from skiff.client.errors import NoOffsetsError
from skiff.client.producer import AsyncProducer
from skiff.client.pull_client import PULL_CLIENT_GROUP, AsyncPullClient
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.common.message import Message
from skiff.common.names import (
    DLQ_PREFIX,
    OFFSET_MOVED_EVENT,
    RETRY_PREFIX,
    SELF_TEST_TOPIC,
    SYSTEM_TOPICS,
    TRACE_TOPIC,
    TRANS_GROUP,
)
from skiff.dashboard.form import Form
from skiff.dashboard.messages import MESSAGES_PER_REQUEST_MAX, MessageService, message_row
from skiff.dashboard.rates import Rates
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.errors import ConsumerNotOnlineError

DASHBOARD_INSTANCE = "skiff-dashboard"
DASHBOARD_PRODUCER_GROUP = "SKIFF_DASHBOARD_PRODUCER"
DASHBOARD_PULL_GROUP = "SKIFF_DASHBOARD_CONSUMER"
SYSTEM_GROUPS = frozenset({ADMIN_GROUP, TRANS_GROUP, PULL_CLIENT_GROUP, DASHBOARD_PULL_GROUP})
"""Groups brokers and tools use themselves; the group list hides them."""


@dataclasses.dataclass(frozen=True, slots=True)
class DashboardConfig:
    namesrv_addr: str
    sample_interval_s: float = 2.0
    """How often the in/out rates are sampled for the live charts."""
    rates_idle_s: float = 60.0
    """Sampling stops this long after the last look at the charts or the cluster page."""
    history_points: int = 300
    """Samples the charts keep (10 minutes at the default interval)."""
    session_idle_s: float = 3600.0
    """A login (brokers with ACL on) ends after this long without a request."""
    sessions_max: int = 64
    """Logins kept at once; past that the least recently used one is signed out."""


SYSTEM_TOPIC_NAMES = frozenset({*SYSTEM_TOPICS, TRACE_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT})
"""Topics brokers and clients keep for themselves (RocketMQ's system topics)."""


def topic_kind(topic: str, own_names: frozenset[str] = frozenset()) -> str:
    """``normal``, ``retry``, ``dlq`` or ``system`` (the topic list filters on it). ``own_names``
    are cluster and broker names, which brokers register as topics of their own."""
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    if topic in SYSTEM_TOPIC_NAMES or topic in own_names or topic.upper().startswith("RMQ_SYS_"):
        return "system"
    return "normal"


class Dashboard:
    """One set of clients; ``credentials`` (a login) sign their requests, else the environment's
    keys do when set (`Credentials.from_env`), else none."""

    def __init__(self, config: DashboardConfig, credentials: Credentials | None = None,
                 instance_name: str = DASHBOARD_INSTANCE) -> None:
        self.config = config
        self.credentials = credentials
        client = ClientConfig(config.namesrv_addr, instance_name, credentials=credentials)
        self.admin = AsyncAdmin(client_config=client)
        self.producer = AsyncProducer(DASHBOARD_PRODUCER_GROUP, client_config=client)
        self.puller = AsyncPullClient(group=DASHBOARD_PULL_GROUP, client_config=client)
        self.messages = MessageService(self.admin, self.producer, self.puller)
        self.rates = Rates(self.admin, config.sample_interval_s, config.history_points, config.rates_idle_s)

    async def start(self) -> None:
        await self.admin.start()
        await self.producer.start()
        await self.puller.start()

    async def stop(self) -> None:
        await self.rates.stop()
        for client in (self.puller, self.producer, self.admin):
            await client.shutdown()

    # ------------------------------------------------------------ cluster

    async def cluster(self) -> dict[str, Any]:
        brokers = await self.admin.brokers()
        return {"brokers": [self._broker_row(b) for b in brokers], "rates": self.live_rates()}

    def live_rates(self) -> dict[str, Any]:
        """The chart's columns; looking at them keeps the sampling going (`Rates.watch`)."""
        self.rates.watch()
        return self.rates.snapshot()

    def _broker_row(self, b: BrokerInfo) -> dict[str, Any]:
        def number(key: str) -> int:
            return int(b.runtime.get(key) or 0)

        tps = self.rates.broker_tps(b.addr)
        return {
            "cluster": b.cluster, "broker_name": b.broker_name, "broker_id": b.broker_id, "addr": b.addr,
            "role": "MASTER" if b.broker_id == 0 else "SLAVE", "version": b.version,
            "disk_ratio": float(b.runtime.get("commitLogDiskRatio") or 0),
            "commit_log_bytes": number("commitLogMaxOffset") - number("commitLogMinOffset"),
            "put_total": number("msgPutTotalTodayNow"), "get_total": number("msgGetTotalTodayNow"),
            "in_tps": tps[0], "out_tps": tps[1], "runtime": b.runtime.get("runtime", ""), "error": b.error,
        }

    # ------------------------------------------------------------- topics

    async def topics(self) -> dict[str, Any]:
        names = await self.admin.topic_list()
        info = await self.admin.cluster_info()
        own = frozenset([*info.cluster_addr_table, *info.broker_addr_table])
        return {"topics": [{"topic": t, "kind": topic_kind(t, own)} for t in names]}

    async def topic(self, topic: str) -> dict[str, Any]:
        route = await self.admin.topic_route(topic)
        status = await self.admin.topic_status(topic)
        return {
            "topic": topic, "kind": topic_kind(topic),
            "route": [{"broker_name": q.broker_name, "read_queue_nums": q.read_queue_nums,
                       "write_queue_nums": q.write_queue_nums, "perm": int(q.perm)} for q in route.queue_datas],
            "brokers": [{"broker_name": b.broker_name, "cluster": b.cluster, "master_addr": b.master_addr}
                        for b in route.broker_datas],
            "queues": [{"broker_name": q.mq.broker_name, "queue_id": q.mq.queue_id, "min_offset": q.min_offset,
                        "max_offset": q.max_offset, "last_update_timestamp": q.last_update_timestamp}
                       for q in status],
            "messages": sum(q.messages for q in status),
        }

    async def save_topic(self, form: Form) -> dict[str, Any]:
        topic = form.text("topic")
        queues = form.integer("queue_nums", DEFAULT_QUEUE_NUMS, low=1, high=QUEUES_PER_TOPIC_MAX)
        read_queues = form.integer("read_queue_nums", queues, low=1, high=QUEUES_PER_TOPIC_MAX)
        perm = form.integer("perm", int(Perm.READ | Perm.WRITE), low=0, high=7)  # the admin says which it takes
        written = await self.admin.create_topic(topic, queue_nums=queues, read_queue_nums=read_queues, perm=perm,
                                                order=form.flag("order"))
        return {"topic": topic, "brokers": written}

    async def delete_topic(self, topic: str) -> dict[str, Any]:
        return {"topic": topic, "brokers": await self.admin.delete_topic(topic)}

    async def send(self, topic: str, form: Form) -> dict[str, Any]:
        keys = form.text("keys", "").split()
        count = form.integer("count", 1, low=1, high=MESSAGES_PER_REQUEST_MAX)
        msg = Message.of(topic, form.text("body").encode(), tags=form.text("tags", "") or None, keys=keys or None)
        results = [await self.producer.send(msg) for _ in range(count)]
        return {"sent": [{"status": r.send_status.name, "msg_id": r.msg_id, "offset_msg_id": r.offset_msg_id,
                          "broker_name": r.message_queue.broker_name, "queue_id": r.message_queue.queue_id,
                          "queue_offset": r.queue_offset} for r in results]}

    # ----------------------------------------------------- consumer groups

    async def groups(self) -> dict[str, Any]:
        names = [g for g in await self.admin.consumer_groups() if g not in SYSTEM_GROUPS]
        rows = await asyncio.gather(*(self._group_summary(g) for g in names))
        return {"groups": list(rows)}

    async def _progress(self, group: str) -> ConsumerProgress:
        """The group's progress; none yet for a group that has not committed an offset."""
        try:
            return await self.admin.consumer_progress(group)
        except NoOffsetsError:
            return ConsumerProgress(group, ())

    async def _group_summary(self, group: str) -> dict[str, Any]:
        progress = await self._progress(group)
        members = await self._members(group)
        return {"group": group, "members": len(members), "total_lag": progress.total_lag,
                "topics": sorted({q.mq.topic for q in progress.queues}), "consume_tps": progress.consume_tps}

    async def _members(self, group: str) -> list[dict[str, Any]]:
        try:
            conns = await self.admin.consumer_connections(group)
        except ConsumerNotOnlineError:
            return []
        return [{"client_id": c.client_id, "client_addr": c.client_addr, "language": c.language,
                 "version": c.version} for c in conns.connections]

    async def group(self, group: str) -> dict[str, Any]:
        progress = await self._progress(group)
        return {
            "group": group, "total_lag": progress.total_lag, "consume_tps": progress.consume_tps,
            "members": await self._members(group),
            "queues": [{"topic": q.mq.topic, "broker_name": q.mq.broker_name, "queue_id": q.mq.queue_id,
                        "broker_offset": q.broker_offset, "consumer_offset": q.consumer_offset, "lag": q.lag,
                        "last_timestamp": q.last_timestamp} for q in progress.queues],
        }

    async def reset_offset(self, group: str, form: Form) -> dict[str, Any]:
        topic = form.text("topic")
        timestamp_ms = form.time_ms("timestamp")
        offsets = await self.admin.reset_offset_by_time(group, topic, timestamp_ms)
        return {"group": group, "topic": topic, "timestamp_ms": timestamp_ms,
                "offsets": [{"broker_name": mq.broker_name, "queue_id": mq.queue_id, "offset": off}
                            for mq, off in sorted(offsets.items(), key=lambda kv: (kv[0].broker_name,
                                                                                     kv[0].queue_id))]}

    async def consume(self, group: str, form: Form) -> dict[str, Any]:
        topic = form.text("topic")
        max_messages = form.integer("max_messages", 32, low=1, high=MESSAGES_PER_REQUEST_MAX)
        await self.admin.topic_route(topic)  # a topic that is not there creates no group
        if group not in await self.admin.consumer_groups():
            await self.admin.create_consumer_group(group)
        consumed = await self.messages.consume(group, topic, max_messages)
        return {"group": group, "topic": topic, "messages": [message_row(m) for m in consumed]}

    # --------------------------------------------------------------- timer

    async def timer(self) -> dict[str, Any]:
        return {"brokers": [{"broker_name": t.broker_name, "addr": t.addr, "slot_ms": t.slot_ms,
                             "scheduled": t.scheduled, "error": t.error,
                             "slots": [{"slot_start_ms": s.slot_start_ms, "scheduled": s.scheduled,
                                        "loaded": s.loaded} for s in t.slots],
                             "stats": dataclasses.asdict(t.stats)} for t in await self.admin.timer_slots()]}
