"""What the dashboard shows and does, as plain JSON-ready dicts, over the client's admin API.

`Dashboard` owns one admin, one producer and one pull client (all of
`skiff.client`), so the pages and the JSON API have no second path to a broker.
Message questions live in `skiff.dashboard.messages`; the in/out rates behind the
live charts in `skiff.dashboard.rates`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

from skiff.client import ClientConfig, TlsClientConfig
from skiff.client.admin import ADMIN_GROUP, AsyncAdmin
from skiff.client.admin_results import BrokerInfo, ConsumerConnections, ConsumerProgress
from skiff.client.credentials import Credentials
from skiff.client.errors import NoOffsetsError, NoRouteError
from skiff.client.producer import AsyncProducer
from skiff.client.pull_client import PULL_CLIENT_GROUP, AsyncPullClient
from skiff.common.errors import SkiffError
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.common.message import Message, MessageQueue
from skiff.common.names import (
    DLQ_PREFIX,
    OFFSET_MOVED_EVENT,
    RETRY_PREFIX,
    SELF_TEST_TOPIC,
    SYSTEM_TOPICS,
    TBW102,
    TRACE_TOPIC,
    TRANS_GROUP,
)
from skiff.dashboard.form import Form
from skiff.dashboard.group_form import group_changes, group_settings
from skiff.dashboard.messages import MESSAGES_PER_REQUEST_MAX, MessageService, message_row
from skiff.dashboard.rates import Rates
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.errors import ConsumerNotOnlineError, TopicNotExistError

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
    tls: TlsClientConfig | None = None
    """Connect to the NameServers and brokers with TLS (docs/tls.md); None: plaintext."""


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


_RUNTIME = re.compile(r"\[\s*(\d+) days?, (\d+) hours?, (\d+) minutes?, (\d+) seconds?\s*\]")


def uptime_seconds(runtime: str) -> int | None:
    """Seconds in a broker's ``runtime`` (RocketMQ's ``[ 0 days, 3 hours, 12 minutes, 5 seconds ]``);
    None when it is not in that form."""
    match = _RUNTIME.fullmatch(runtime.strip())
    if match is None:
        return None
    days, hours, minutes, seconds = map(int, match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def readable_uptime(runtime: str) -> str:
    """A broker's ``runtime`` in its two largest units ("3 h 12 min", "2 d 4 h", "45 s"), or as it
    is when it is not RocketMQ's form."""
    total = uptime_seconds(runtime)
    if total is None:
        return runtime
    parts = [(total // 86400, "d"), (total % 86400 // 3600, "h"), (total % 3600 // 60, "min"), (total % 60, "s")]
    first = next((i for i, (n, _) in enumerate(parts) if n), len(parts) - 1)
    return " ".join(f"{n} {unit}" for i, (n, unit) in enumerate(parts[first:first + 2]) if n or i == 0)


def group_topics(conns: ConsumerConnections | None, progress: ConsumerProgress) -> list[str]:
    """The topics a group consumes, the first one the default of the page's forms: those its
    members online subscribe to, then those it has offsets on; not its retry topic (every push
    consumer subscribes to it, and it sorts first) nor a DLQ."""
    subscribed = sorted(t for t in (conns.subscriptions if conns else {}) if not _retry_or_dlq(t))
    with_offsets = sorted({q.mq.topic for q in progress.queues if not _retry_or_dlq(q.mq.topic)})
    return subscribed + [t for t in with_offsets if t not in subscribed]


def _retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


class Dashboard:
    """One set of clients; ``credentials`` (a login) sign their requests, else the environment's
    keys do when set (`Credentials.from_env`), else none."""

    def __init__(self, config: DashboardConfig, credentials: Credentials | None = None,
                 instance_name: str = DASHBOARD_INSTANCE) -> None:
        self.config = config
        self.credentials = credentials
        client = ClientConfig(config.namesrv_addr, instance_name, credentials=credentials, tls=config.tls)
        self.admin = AsyncAdmin(client_config=client)
        self.producer = AsyncProducer(DASHBOARD_PRODUCER_GROUP, client_config=client)
        self.puller = AsyncPullClient(group=DASHBOARD_PULL_GROUP, client_config=client)
        self.messages = MessageService(self.admin, self.producer, self.puller)
        self.rates = Rates(self.admin, config.sample_interval_s, config.history_points, config.rates_idle_s)
        self._trace_starts: dict[tuple[str, int], tuple[int, int]] = {}
        """(broker name, queue id) of the trace topic → (the broker's boot time, the queue's offset
        then): where the trace messages stored since the broker started begin."""

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
        traced = await self._trace_puts(brokers)
        return {"brokers": [self._broker_row(b, traced.get(b.addr)) for b in brokers], "rates": self.live_rates()}

    def live_rates(self) -> dict[str, Any]:
        """The chart's columns; looking at them keeps the sampling going (`Rates.watch`)."""
        self.rates.watch()
        return self.rates.snapshot()

    def _broker_row(self, b: BrokerInfo, traced: int | None) -> dict[str, Any]:
        """``traced``: trace messages the broker stored since it started, None if not known."""
        def number(key: str) -> int:
            return int(b.runtime.get(key) or 0)

        tps = self.rates.broker_tps(b.addr)
        put_all = number("msgPutTotalTodayNow")
        runtime = b.runtime.get("runtime", "")
        return {
            "cluster": b.cluster, "broker_name": b.broker_name, "broker_id": b.broker_id, "addr": b.addr,
            "role": "MASTER" if b.broker_id == 0 else "SLAVE", "version": b.version,
            "disk_ratio": float(b.runtime.get("commitLogDiskRatio") or 0),
            "commit_log_bytes": number("commitLogMaxOffset") - number("commitLogMinOffset"),
            "put_total": max(0, put_all - traced) if traced is not None else put_all,
            "trace_put_total": traced, "put_total_all": put_all, "get_total": number("msgGetTotalTodayNow"),
            "in_tps": tps[0], "out_tps": tps[1], "runtime": runtime, "uptime": readable_uptime(runtime),
            "uptime_s": uptime_seconds(runtime), "error": b.error,
        }

    async def _trace_puts(self, brokers: list[BrokerInfo]) -> dict[str, int]:
        """Master address → messages it stored in the trace topic since it started (the broker's
        put total counts them with the rest): each queue's max offset less its offset at the
        broker's boot time. Empty when the trace topic's offsets cannot be read."""
        masters = {b.broker_name: b for b in brokers
                   if b.broker_id == 0 and b.error is None and int(b.runtime.get("bootTimestamp") or 0) > 0}
        if not masters:
            return {}
        try:
            queues = await self.admin.topic_status(TRACE_TOPIC)
            queues = [q for q in queues if q.mq.broker_name in masters]
            starts = await asyncio.gather(*(
                self._trace_start(q.mq, int(masters[q.mq.broker_name].runtime["bootTimestamp"])) for q in queues))
        except (NoRouteError, TopicNotExistError):
            return {b.addr: 0 for b in masters.values()}  # nothing traced yet
        except SkiffError:
            return {}
        traced = {b.addr: 0 for b in masters.values()}
        for q, start in zip(queues, starts):
            traced[masters[q.mq.broker_name].addr] += max(0, q.max_offset - start)
        return traced

    async def _trace_start(self, mq: MessageQueue, boot_ms: int) -> int:
        """The offset of the first message of trace queue ``mq`` stored after ``boot_ms`` (asked
        once per queue and boot)."""
        key = (mq.broker_name, mq.queue_id)
        known = self._trace_starts.get(key)
        if known is None or known[0] != boot_ms:
            known = self._trace_starts[key] = (boot_ms, await self.admin.search_offset(mq, boot_ms))
        return known[1]

    # ------------------------------------------------------------- topics

    async def topics(self) -> dict[str, Any]:
        names = await self.admin.topic_list()
        info = await self.admin.cluster_info()
        own = frozenset([*info.cluster_addr_table, *info.broker_addr_table])
        return {"topics": [{"topic": t, "kind": topic_kind(t, own)} for t in names],
                "queue_nums": await self.auto_create_queue_nums()}

    async def auto_create_queue_nums(self) -> int:
        """The queues per broker a topic gets when a producer's first send creates it, the
        default of the topic form: what producers ask for (RocketMQ's defaultTopicQueueNums,
        the dashboard's own producer's setting), at most what the brokers' template topic
        TBW102 has (their defaultTopicQueueNums)."""
        asked = self.producer.options.default_topic_queue_nums
        try:
            route = await self.admin.topic_route(TBW102)
        except SkiffError:  # no broker auto-creates topics, or no NameServer answers (what needs one says so)
            return asked
        template = [q.write_queue_nums for q in route.queue_datas]
        return min(asked, max(template)) if template else asked

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
            "tier": await self._tier(topic),
        }

    async def _tier(self, topic: str) -> list[dict[str, Any]]:
        """Each queue's tier state, on the brokers that tier the topic (docs/tiered-storage.md);
        empty where none does (a broker without a tier, or a RocketMQ broker, answers an error)."""
        rows = []
        for b in await self.admin.tier(topic, timeout_ms=5_000):
            if b.state is not None and b.state.tiered:
                rows += [{"broker_name": b.broker_name, "url": b.state.url, "queue_id": q.queue_id,
                          "uploaded_to": q.uploaded_to, "local_min_offset": q.local_min_offset,
                          "local_max_offset": q.local_max_offset, "lag_messages": q.lag_messages,
                          "remote_files": q.remote_files, "remote_bytes": q.remote_bytes} for q in b.state.queues]
        return rows

    async def save_topic(self, form: Form) -> dict[str, Any]:
        topic = form.text("topic")
        default = None if form.given("queue_nums") else await self.auto_create_queue_nums()
        queues = form.integer("queue_nums", default, low=1, high=QUEUES_PER_TOPIC_MAX)
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
        conns = await self._connections(group)
        return {"group": group, "members": len(conns.connections) if conns else 0, "total_lag": progress.total_lag,
                "topics": sorted({q.mq.topic for q in progress.queues}), "consume_tps": progress.consume_tps}

    async def _connections(self, group: str) -> ConsumerConnections | None:
        """The group's members online and their subscriptions; None when none is online."""
        try:
            return await self.admin.consumer_connections(group)
        except ConsumerNotOnlineError:
            return None

    async def group(self, group: str) -> dict[str, Any]:
        progress = await self._progress(group)
        conns = await self._connections(group)
        return {
            "group": group, "total_lag": progress.total_lag, "consume_tps": progress.consume_tps,
            "members": [{"client_id": c.client_id, "client_addr": c.client_addr, "language": c.language,
                         "version": c.version_name} for c in (conns.connections if conns else ())],
            "topics": group_topics(conns, progress),
            "queues": [{"topic": q.mq.topic, "broker_name": q.mq.broker_name, "queue_id": q.mq.queue_id,
                        "broker_offset": q.broker_offset, "consumer_offset": q.consumer_offset, "lag": q.lag,
                        "in_flight": q.in_flight, "last_timestamp": q.last_timestamp} for q in progress.queues],
            "settings": await self._group_settings(group),
        }

    async def _group_settings(self, group: str) -> dict[str, Any] | None:
        """The group's settings on the first master that has it (mqadmin updateSubGroup's), or
        None when no master does (a group only its offsets or members name)."""
        configs = await self.admin.consumer_group_configs(group)
        if not configs:
            return None
        return group_settings(configs[min(configs)])

    async def save_group(self, form: Form) -> dict[str, Any]:
        """Create the group ``group`` or change the settings the form gives (`group_changes`) on
        every master, keeping the others."""
        group = form.text("group")
        changes = group_changes(form)
        brokers = await self.admin.update_consumer_group(group, **changes)
        return {"group": group, "brokers": brokers, "changed": sorted(changes),
                "settings": await self._group_settings(group)}

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
