"""What the dashboard's pages are given, over an admin that answers from tables: the uptime, the
put totals with trace messages apart, the topic a group's forms start with, and the queue count
the topic form starts with. (tests/integration/test_dashboard_api.py has a real cluster's.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from skiff.client.admin_results import (
    BrokerInfo,
    ClientConnection,
    ConsumerConnections,
    ConsumerProgress,
    QueueProgress,
    QueueStatus,
)
from skiff.client.errors import NoOffsetsError, NoRouteError
from skiff.common.message import MessageQueue
from skiff.common.names import TBW102, TRACE_TOPIC
from skiff.dashboard.form import Form
from skiff.dashboard.service import Dashboard, DashboardConfig, readable_uptime, uptime_seconds
from skiff.dashboard.web import templates
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.heartbeat import SubscriptionData
from skiff.protocol.bodies.route import ClusterInfo, QueueData, TopicRouteData
from skiff.protocol.errors import ConsumerNotOnlineError


class TableAdmin:
    """The admin calls the dashboard makes, answered from the tables a test sets."""

    def __init__(self) -> None:
        self.broker_list: list[BrokerInfo] = []
        self.statuses: dict[str, list[QueueStatus]] = {}
        self.offsets_at: dict[tuple[str, int, int], int] = {}
        """(broker name, queue id, time) → the offset search_offset answers."""
        self.searches: list[tuple[str, int, int]] = []
        self.routes: dict[str, TopicRouteData] = {}
        self.progress: dict[str, ConsumerProgress] = {}
        self.connections: dict[str, ConsumerConnections] = {}
        self.created: list[tuple[str, dict[str, Any]]] = []
        self.group_configs: dict[str, SubscriptionGroupConfig] = {}

    async def brokers(self) -> list[BrokerInfo]:
        return self.broker_list

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        if topic not in self.statuses:
            raise NoRouteError(topic)
        return self.statuses[topic]

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        self.searches.append((mq.broker_name, mq.queue_id, timestamp_ms))
        return self.offsets_at[(mq.broker_name, mq.queue_id, timestamp_ms)]

    async def topic_route(self, topic: str) -> TopicRouteData:
        if topic not in self.routes:
            raise NoRouteError(topic)
        return self.routes[topic]

    async def topic_list(self) -> list[str]:
        return sorted(["Orders", *self.routes])

    async def cluster_info(self) -> ClusterInfo:
        return ClusterInfo()

    async def create_topic(self, topic: str, **kwargs: Any) -> list[str]:
        self.created.append((topic, kwargs))
        return ["broker-a"]

    async def consumer_progress(self, group: str) -> ConsumerProgress:
        if group not in self.progress:
            raise NoOffsetsError(group)
        return self.progress[group]

    async def consumer_connections(self, group: str) -> ConsumerConnections:
        if group not in self.connections:
            raise ConsumerNotOnlineError(group)
        return self.connections[group]

    async def consumer_group_configs(self, group: str) -> dict[str, SubscriptionGroupConfig]:
        return {"127.0.0.1:10911": self.group_configs[group]} if group in self.group_configs else {}


def with_dashboard(test: Callable[[Dashboard, TableAdmin], Awaitable[None]]) -> None:
    async def main() -> None:
        dashboard = Dashboard(DashboardConfig("127.0.0.1:1", sample_interval_s=3600))  # never started
        admin = TableAdmin()
        dashboard.admin = dashboard.rates.admin = admin  # type: ignore[assignment]
        try:
            await test(dashboard, admin)
        finally:
            await dashboard.rates.stop()
    asyncio.run(main())


# ------------------------------------------------------------------ uptime

@pytest.mark.parametrize("runtime, seconds, readable", [
    ("[ 0 days, 0 hours, 0 minutes, 45 seconds ]", 45, "45 s"),
    ("[ 0 days, 0 hours, 5 minutes, 7 seconds ]", 307, "5 min 7 s"),
    ("[ 0 days, 3 hours, 12 minutes, 5 seconds ]", 11525, "3 h 12 min"),
    ("[ 0 days, 3 hours, 0 minutes, 5 seconds ]", 10805, "3 h"),
    ("[ 2 days, 4 hours, 59 minutes, 1 seconds ]", 190741, "2 d 4 h"),
    ("[ 0 days, 0 hours, 0 minutes, 0 seconds ]", 0, "0 s"),
    ("", None, ""),  # a broker that did not answer
    ("up since Monday", None, "up since Monday"),  # another broker's wording is shown as it is
])
def test_uptime_is_readable(runtime: str, seconds: int | None, readable: str):
    assert (uptime_seconds(runtime), readable_uptime(runtime)) == (seconds, readable)


# ------------------------------------------------------ trace put totals

def broker(broker_id: int, put_total: int, boot_ms: int = 1_000, **runtime: str) -> BrokerInfo:
    return BrokerInfo("DefaultCluster", "broker-a", broker_id, f"10.0.0.{broker_id + 1}:10911", {
        "msgPutTotalTodayNow": str(put_total), "msgGetTotalTodayNow": "7", "bootTimestamp": str(boot_ms),
        "runtime": "[ 0 days, 3 hours, 12 minutes, 5 seconds ]", "brokerVersionDesc": "V4_9_7", **runtime})


def trace_queue(queue_id: int, max_offset: int) -> QueueStatus:
    return QueueStatus(MessageQueue(TRACE_TOPIC, "broker-a", queue_id), 0, max_offset, 0)


def test_put_total_leaves_out_the_trace_messages_stored_since_the_broker_started():
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        admin.broker_list = [broker(0, put_total=120), broker(1, put_total=0)]
        # 30 and 25 trace messages in all; 10 and 5 of them were there when the broker started
        admin.statuses[TRACE_TOPIC] = [trace_queue(0, 30), trace_queue(1, 25)]
        admin.offsets_at.update({("broker-a", 0, 1_000): 10, ("broker-a", 1, 1_000): 5})
        master, slave = (await d.cluster())["brokers"]
        assert (master["put_total"], master["trace_put_total"], master["put_total_all"]) == (80, 40, 120)
        assert (master["uptime"], master["uptime_s"], master["runtime"]) == (
            "3 h 12 min", 11525, "[ 0 days, 3 hours, 12 minutes, 5 seconds ]")
        assert (slave["put_total"], slave["trace_put_total"]) == (0, None)  # a slave's trace puts are not known

        admin.broker_list = [broker(0, put_total=125)]
        admin.statuses[TRACE_TOPIC] = [trace_queue(0, 33), trace_queue(1, 25)]
        (master,) = (await d.cluster())["brokers"]
        assert (master["put_total"], master["trace_put_total"]) == (82, 43)
        assert len(admin.searches) == 2, "where a queue stood at boot is asked once per boot"

        admin.broker_list = [broker(0, put_total=4, boot_ms=9_000)]  # restarted
        admin.offsets_at.update({("broker-a", 0, 9_000): 33, ("broker-a", 1, 9_000): 25})
        admin.statuses[TRACE_TOPIC] = [trace_queue(0, 34), trace_queue(1, 25)]
        (master,) = (await d.cluster())["brokers"]
        assert (master["put_total"], master["trace_put_total"]) == (3, 1)
        assert len(admin.searches) == 4

    with_dashboard(test)


def test_without_a_trace_topic_every_put_is_a_user_put():
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        admin.broker_list = [broker(0, put_total=12)]
        (master,) = (await d.cluster())["brokers"]
        assert (master["put_total"], master["trace_put_total"], master["put_total_all"]) == (12, 0, 12)

    with_dashboard(test)


def test_the_cluster_page_shows_the_uptime_and_the_trace_puts_apart():
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        admin.broker_list = [broker(0, put_total=120), broker(1, put_total=0)]
        admin.statuses[TRACE_TOPIC] = [trace_queue(0, 40)]
        admin.offsets_at[("broker-a", 0, 1_000)] = 0
        html = render("cluster.html", await d.cluster())
        assert "<td>80</td><td>40</td>" in html and "<td>0</td><td></td>" in html
        assert '>3 h 12 min</td>' in html and "[ 0 days" not in html.replace('title="[ 0 days', "")

    with_dashboard(test)


def render(template: str, data: dict[str, Any]) -> str:
    class Request:
        query: dict[str, str] = {}
    return templates().get_template(template).render(data=data, error=None, request=Request(), path="/", user=None)


# ------------------------------------------- the topic a group's forms start with

def progress(group: str, *topics: str) -> ConsumerProgress:
    return ConsumerProgress(group, tuple(QueueProgress(MessageQueue(t, "broker-a", 0), 5, 3, 0) for t in topics))


def test_consume_from_here_starts_with_the_subscribed_topic_not_the_retry_topic():
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        # a push consumer's group: offsets on its retry topic (which sorts first) and its topic
        admin.progress["g"] = progress("g", "%RETRY%g", "Orders")
        admin.connections["g"] = ConsumerConnections(
            "g", (ClientConnection("c1", "10.0.0.9:5000", "JAVA", 1),),
            {"%RETRY%g": SubscriptionData("%RETRY%g"), "Payments": SubscriptionData("Payments")})
        data = await d.group("g")
        assert data["topics"] == ["Payments", "Orders"]  # subscribed first, then those with offsets
        html = render("group.html", data)
        assert html.count('<input name="topic" required value="Payments">') == 2  # consume and reset

        admin.connections.clear()  # nobody online: the topics it has offsets on, retry and DLQ left out
        admin.progress["g"] = progress("g", "%DLQ%g", "%RETRY%g", "Orders")
        assert (await d.group("g"))["topics"] == ["Orders"]
        admin.progress["g"] = progress("g", "%RETRY%g")
        data = await d.group("g")
        assert data["topics"] == [] and '<input name="topic" required value="">' in render("group.html", data)
        assert (await d.group("new"))["topics"] == []

    with_dashboard(test)


# -------------------------------------- the queue count the topic form starts with

def tbw102(*write_queues: int) -> TopicRouteData:
    return TopicRouteData(tuple(QueueData(f"broker-{i}", n, n, 7) for i, n in enumerate(write_queues)))


@pytest.mark.parametrize("template, expected", [
    (None, 4),  # no broker auto-creates topics: what producers ask for
    (tbw102(8), 4),  # a producer asks for 4 of the template's 8 (RocketMQ's defaults)
    (tbw102(2), 2),  # a broker with defaultTopicQueueNums=2 gives no more
    (tbw102(2, 8), 4),
])
def test_the_topic_form_starts_with_the_queue_count_of_an_auto_created_topic(
        template: TopicRouteData | None, expected: int):
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        assert d.producer.options.default_topic_queue_nums == 4
        if template is not None:
            admin.routes[TBW102] = template
        data = await d.topics()
        assert data["queue_nums"] == expected
        assert f'<input name="queue_nums" type="number" value="{expected}"' in render("topics.html", data)
        await d.save_topic(Form({"topic": "Made"}))  # the API takes the same default
        await d.save_topic(Form({"topic": "Asked", "queue_nums": 3}))
        assert [(t, kw["queue_nums"], kw["read_queue_nums"]) for t, kw in admin.created] == [
            ("Made", expected, expected), ("Asked", 3, 3)]

    with_dashboard(test)


def test_a_group_page_shows_its_settings_and_a_pop_groups_in_flight_messages():
    async def test(d: Dashboard, admin: TableAdmin) -> None:
        # a POP group: 10 stored, popped up to 8, 2 of them not acknowledged (the committed offset, 4, is the lowest)
        admin.progress["pop"] = ConsumerProgress("pop", (QueueProgress(MessageQueue("Orders", "broker-a", 0), 10, 4, 0,
                                                                       8, 2),))
        admin.group_configs["pop"] = SubscriptionGroupConfig("pop", consume_message_orderly=True, retry_max_times=3)
        data = await d.group("pop")
        assert (data["total_lag"], data["queues"][0]["lag"], data["queues"][0]["in_flight"]) == (4, 4, 2)
        assert (data["settings"]["orderly"], data["settings"]["retry_max_times"]) == (True, 3)
        html = render("group.html", data)
        assert "<td>4</td><td>2</td>" in html and '<table id="settings">' in html
        assert (await d.group("nobody"))["settings"] is None

    with_dashboard(test)
