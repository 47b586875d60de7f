"""The dashboard's JSON API against a real NameServer and broker: every answer checked
against what the test did (topics created, messages sent, offsets consumed)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from skiff.client import AsyncProducer, AsyncPushConsumer, ConsumeStatus, Message
from skiff.client._impl.config import ClientConfig
from skiff.dashboard.service import Dashboard, DashboardConfig
from skiff.testing.cluster import Cluster
from skiff.testing.dashboard import api_call as call
from skiff.testing.dashboard import with_dashboard_client
from skiff.testing.processes import run_skiff, start_skiff
from skiff.testing.waits import eventually
from skiff.transport.loop import run_coroutine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("dashboard-api")) as c:
        yield c


def with_client(cluster: Cluster, test: Callable[[TestClient], Awaitable[Any]]) -> None:
    with_dashboard_client(cluster.namesrv_addr, test)


def test_cluster_topics_messages_and_trace(cluster: Cluster):
    async def test(client: TestClient) -> None:
        brokers = (await call(client, "GET", "/api/cluster"))["brokers"]
        assert [(b["broker_name"], b["role"], b["addr"], b["version"]) for b in brokers] == [
            ("broker-a", "MASTER", cluster.broker_addr(), "V4_9_7")]
        await call(client, "POST", "/api/topics", {"topic": "ApiOrders", "queue_nums": 2})
        topics = {t["topic"]: t["kind"] for t in (await call(client, "GET", "/api/topics"))["topics"]}
        assert topics["ApiOrders"] == "normal" and topics["broker-a"] == "system"
        before = int(time.time() * 1000) - 1
        sent = (await call(client, "POST", "/api/topics/ApiOrders/send",
                           {"body": '{"order": 7}', "keys": "order-7 vip", "tags": "created", "count": 3}))["sent"]
        assert [s["status"] for s in sent] == ["SEND_OK"] * 3
        topic = await call(client, "GET", "/api/topics/ApiOrders")
        assert topic["messages"] == 3 and [(r["read_queue_nums"], r["write_queue_nums"]) for r in topic["route"]] \
            == [(2, 2)]
        assert sum(q["max_offset"] for q in topic["queues"]) == 3

        by_key = (await call(client, "GET", "/api/messages?topic=ApiOrders&key=order-7"))["messages"]
        assert sorted(m["msg_id"] for m in by_key) == sorted(s["msg_id"] for s in sent)
        by_time = (await call(client, "GET", f"/api/messages?topic=ApiOrders&begin={before}"))["messages"]
        assert sorted(m["offset_msg_id"] for m in by_time) == sorted(s["offset_msg_id"] for s in sent)
        future = int(time.time() * 1000) + 60_000
        assert (await call(client, "GET", f"/api/messages?topic=ApiOrders&begin={future}"))["messages"] == []

        first = sent[0]

        async def traced() -> Any:
            d = await call(client, "GET", f"/api/message?msg_id={first['offset_msg_id']}")
            return d if d["trace"] else None
        detail = await eventually(traced, 15, "the send's trace")
        m = detail["message"]
        assert (m["msg_id"], m["tags"], m["keys"]) == (first["msg_id"], "created", ["order-7", "vip"])
        assert m["body"] == {"encoding": "json", "text": '{\n  "order": 7\n}', "truncated": False}
        send = detail["trace"][0]
        assert (send["kind"], send["group"], send["queue_offset"]) == ("send", "SKIFF_DASHBOARD_PRODUCER",
                                                                      first["queue_offset"])

        await call(client, "DELETE", "/api/topics/ApiOrders")
        assert "ApiOrders" not in {t["topic"] for t in (await call(client, "GET", "/api/topics"))["topics"]}
        missing = await call(client, "GET", "/api/topics/ApiOrders", status=404)
        assert "ApiOrders" in missing["error"]

    with_client(cluster, test)


def test_lag_rises_with_sends_falls_with_consumption_and_resets_by_time(cluster: Cluster):
    async def test(client: TestClient) -> None:
        await call(client, "POST", "/api/topics", {"topic": "ApiLag", "queue_nums": 2})
        await call(client, "POST", "/api/groups/api-g/consume", {"topic": "NoSuchTopic"}, status=404)
        assert "api-g" not in {g["group"] for g in (await call(client, "GET", "/api/groups"))["groups"]}
        first = await call(client, "POST", "/api/groups/api-g/consume", {"topic": "ApiLag"})
        assert first["messages"] == []
        group = await call(client, "GET", "/api/groups/api-g")
        assert group["total_lag"] == 0 and len(group["queues"]) == 2 and group["members"] == []

        await call(client, "POST", "/api/topics/ApiLag/send", {"body": "hello", "count": 5})
        assert (await call(client, "GET", "/api/groups/api-g"))["total_lag"] == 5
        listed = {g["group"]: g for g in (await call(client, "GET", "/api/groups"))["groups"]}
        assert listed["api-g"]["total_lag"] == 5 and listed["api-g"]["topics"] == ["ApiLag"]

        got = await call(client, "POST", "/api/groups/api-g/consume", {"topic": "ApiLag", "max_messages": 2})
        assert [m["body"]["text"] for m in got["messages"]] == ["hello", "hello"]
        assert (await call(client, "GET", "/api/groups/api-g"))["total_lag"] == 3
        await call(client, "POST", "/api/groups/api-g/consume", {"topic": "ApiLag"})
        assert (await call(client, "GET", "/api/groups/api-g"))["total_lag"] == 0

        reset = await call(client, "POST", "/api/groups/api-g/reset-offset", {"topic": "ApiLag", "timestamp": 0})
        assert sorted(o["offset"] for o in reset["offsets"]) == [0, 0]
        assert (await call(client, "GET", "/api/groups/api-g"))["total_lag"] == 5

        rates = await eventually(lambda: _rates(client), 15, "two rate samples")
        assert len(rates["time"]) == len(rates["in_tps"]) == len(rates["out_tps"])

    with_client(cluster, test)


def test_a_group_is_created_and_its_settings_and_attributes_changed(cluster: Cluster):
    """POST /api/groups: every updateSubGroup setting and RocketMQ 5's group attributes, the
    given ones changing and the others kept; the group page shows them; bad values answer 400."""
    async def test(client: TestClient) -> None:
        made = await call(client, "POST", "/api/groups", {
            "group": "api-settings-g", "orderly": "true", "retry_max_times": 3,
            "retry_policy": '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":9000,"multiplier":3}}',
            "attributes": "+lite.bind.topic=ApiLite,+lite.sub.client.quota=50"})
        assert made["changed"] == ["attributes", "consume_message_orderly", "group_retry_policy", "retry_max_times"]
        await call(client, "POST", "/api/groups", {"group": "api-settings-g", "broadcast": False, "orderly": "",
                                                   "attributes": "-lite.sub.client.quota,+lite.sub.model=Exclusive"})
        settings = (await call(client, "GET", "/api/groups/api-settings-g"))["settings"]
        assert {k: settings[k] for k in ("orderly", "broadcast", "consume_enable", "retry_max_times")} == {
            "orderly": True, "broadcast": False, "consume_enable": True, "retry_max_times": 3}
        assert json.loads(settings["retry_policy"])["exponentialRetryPolicy"] == {
            "initial": 1000, "max": 9000, "multiplier": 3}
        assert settings["attributes"] == {"lite.bind.topic": "ApiLite", "lite.sub.model": "Exclusive"}
        page = await (await client.get("/groups/api-settings-g")).text()
        assert "lite.bind.topic=ApiLite" in page and 'id="settings-form"' in page
        for bad, why in (({"orderly": "yes"}, "orderly must be true or false"),
                         ({"retry_max_times": -1}, "retry_max_times must be between 0"),
                         ({"attributes": "+lite.nope=1"}, "unknown consumer group attribute 'lite.nope'"),
                         ({"retry_policy": "{"}, "retry_policy:")):
            refused = await call(client, "POST", "/api/groups", {"group": "api-settings-g", **bad}, status=400)
            assert why in json.dumps(refused), refused
        await call(client, "POST", "/api/groups", {"orderly": "true"}, status=400)  # no group
    with_client(cluster, test)


def test_put_total_counts_trace_messages_apart_and_the_uptime_is_readable(cluster: Cluster):
    async def test(client: TestClient) -> None:
        await call(client, "POST", "/api/topics", {"topic": "ApiPuts", "queue_nums": 1})

        async def broker() -> dict[str, Any]:
            (b,) = (await call(client, "GET", "/api/cluster"))["brokers"]
            assert b["put_total_all"] == b["put_total"] + b["trace_put_total"]
            return b
        await eventually(lambda: _settled(broker), 15, "the earlier tests' trace messages stored")
        before = await broker()
        async with AsyncProducer("PG-dashboard-puts", client_config=ClientConfig(
                cluster.namesrv_addr, "dashboard-puts", client_ip="127.0.0.1"), trace=False) as producer:
            for _ in range(3):
                await producer.send(Message.of("ApiPuts", b"untraced"))
        await call(client, "POST", "/api/topics/ApiPuts/send", {"body": "traced", "count": 2})  # the dashboard traces

        async def counted() -> dict[str, Any] | None:
            """The row once the sends' trace messages are stored (one may hold both) and no more
            are in flight: the put total and the trace offsets are two reads, and a trace message
            stored between them would make the difference one short."""
            b = await broker()
            if b["trace_put_total"] <= before["trace_put_total"] or not await _settled(broker):
                return None
            return await broker()
        after = await eventually(counted, 20, "the sends' trace messages stored")
        assert after["put_total"] == before["put_total"] + 5, "trace messages are not user puts"
        assert re.fullmatch(r"\d+ (s|min \d+ s|min|h \d+ min|h|d \d+ h|d)", after["uptime"]), after["uptime"]
        assert after["runtime"].startswith("[ 0 days, ") and 0 <= after["uptime_s"] < 3600

    with_client(cluster, test)


async def _settled(broker: Callable[[], Awaitable[dict[str, Any]]]) -> bool:
    """True once two reads of the put totals a second apart agree (no trace message in flight)."""
    def totals(b: dict[str, Any]) -> tuple[int, int]:
        return b["put_total_all"], b["trace_put_total"]
    first = totals(await broker())
    await asyncio.sleep(1.0)
    return first == totals(await broker())


def test_the_topic_form_starts_with_as_many_queues_as_an_auto_created_topic_gets(cluster: Cluster):
    async def test(client: TestClient) -> None:
        queue_nums = (await call(client, "GET", "/api/topics"))["queue_nums"]
        assert queue_nums == 4  # a producer's defaultTopicQueueNums; the broker's TBW102 has 8
        async with AsyncProducer("PG-dashboard-auto", client_config=ClientConfig(
                cluster.namesrv_addr, "dashboard-auto", client_ip="127.0.0.1"), trace=False) as producer:
            await producer.send(Message.of("ApiAutoCreated", b"first"))

        async def route() -> list[dict[str, Any]] | None:  # the broker registers the new topic after the send
            resp = await client.get("/api/topics/ApiAutoCreated")
            return (await resp.json())["route"] if resp.status == 200 else None
        created = await eventually(route, 15, "the auto-created topic's route")
        assert [(r["write_queue_nums"], r["read_queue_nums"]) for r in created] == [(queue_nums, queue_nums)]
        page = await client.get("/topics")
        assert f'name="queue_nums" type="number" value="{queue_nums}"' in await page.text()

    with_client(cluster, test)


def test_a_push_consumers_group_consumes_from_its_topic_by_default_not_its_retry_topic(cluster: Cluster):
    async def test(client: TestClient) -> None:
        await call(client, "POST", "/api/topics", {"topic": "ApiPush", "queue_nums": 1})
        consumer = AsyncPushConsumer("api-push-g", client_config=ClientConfig(
            cluster.namesrv_addr, "dashboard-push", client_ip="127.0.0.1"))
        consumer.subscribe("ApiPush", "*")
        consumer.register_listener(lambda msgs, ctx: ConsumeStatus.CONSUME_SUCCESS)
        async with consumer:
            async def both_topics() -> dict[str, Any] | None:  # offsets on the topic and on %RETRY%api-push-g
                d = await call(client, "GET", "/api/groups/api-push-g")
                return d if len({q["topic"] for q in d["queues"]}) == 2 and d["members"] else None
            group = await eventually(both_topics, 30, "the push consumer's offsets and connection")
            assert sorted(q["topic"] for q in group["queues"]) == ["%RETRY%api-push-g", "ApiPush"]
            assert group["topics"] == ["ApiPush"]
            page = await (await client.get("/groups/api-push-g")).text()
            assert page.count('<input name="topic" required value="ApiPush">') == 2

    with_client(cluster, test)


async def _rates(client: TestClient) -> Any:
    d = await call(client, "GET", "/api/rates")
    return d if len(d["time"]) >= 2 else None


UP_ARGS = ["up", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0", "--metrics-port", "0",
           "--namesrv-metrics-port", "0", "--mappedFileSizeCommitLog=4194304", "--maxHashSlotNum=1024",
           "--maxIndexNum=4096", "--grpcServerPort=0"]


def test_skiff_up_serves_the_dashboard_and_its_start_line_says_where(tmp_path: Path):
    with start_skiff([*UP_ARGS, "--dashboard-port", "0"], cwd=tmp_path) as up:
        url = up.wait_for_line(r"skiff dashboard listening on 127\.0\.0\.1:\d+: open (?P<url>http://\S+/)")["url"]
        broker = up.wait_for_line(r"skiff broker listening on (?P<addr>[\d.]+:\d+)")["addr"]
        with urllib.request.urlopen(url + "api/cluster", timeout=10) as resp:
            brokers = json.load(resp)["brokers"]
        assert [(b["addr"], b["role"]) for b in brokers] == [(broker, "MASTER")]
    assert up.popen.returncode == 0


def test_skiff_up_without_the_dashboard(tmp_path: Path):
    with start_skiff([*UP_ARGS, "--no-dashboard"], cwd=tmp_path) as up:
        up.wait_for_line(r"skiff broker listening on")
    assert up.popen.returncode == 0 and "dashboard" not in up.output


def test_skiff_dashboard_refuses_bad_arguments_and_a_port_in_use():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args, code, reason in [  # bad input exits 2, a port in use 1 (skiff.cli.main)
            (["--port", str(port)], 1, f"skiff: the dashboard cannot listen on 127.0.0.1:{port}: "),
            (["--port", "70000"], 2, "skiff: dashboard port 70000 is not a port (0 picks a free one)"),
            (["-n", "nonsense"], 2, "skiff: namesrv_addr: 'nonsense' is not a host:port address"),
        ]:
            proc = run_skiff(["dashboard", *args])
            assert proc.returncode == code and reason in proc.stdout, proc.stdout


def test_timer_slots_show_a_message_scheduled_for_later(cluster: Cluster):
    async def test(client: TestClient) -> None:
        await call(client, "POST", "/api/topics", {"topic": "ApiLater", "queue_nums": 1})
        due = int(time.time() * 1000) + 3_600_000
        async with AsyncProducer("PG-dashboard-timer", client_config=ClientConfig(
                cluster.namesrv_addr, "dashboard-timer", client_ip="127.0.0.1"), trace=False) as producer:
            await producer.send(Message.of("ApiLater", b"later", deliver_time_ms=due))
        async def scheduled() -> dict[str, Any] | None:  # the timer files the message from the CommitLog
            (broker,) = (await call(client, "GET", "/api/timer"))["brokers"]
            assert broker["error"] is None
            return broker if broker["scheduled"] else None
        broker = await eventually(scheduled, 30, "the message in the timer's slots")
        assert broker["scheduled"] == 1
        (slot,) = [s for s in broker["slots"] if s["scheduled"]]
        assert slot["slot_start_ms"] <= due < slot["slot_start_ms"] + broker["slot_ms"]

    with_client(cluster, test)


def test_rates_are_sampled_only_while_someone_looks(cluster: Cluster):
    """A dashboard (every login has one) asks the brokers for their counters only after a look
    at the rates, and stops once nobody looked for ``rates_idle_s``."""
    async def main() -> None:
        dashboard = Dashboard(DashboardConfig(cluster.namesrv_addr, sample_interval_s=0.1, rates_idle_s=1.0))
        await dashboard.start()
        try:
            assert not dashboard.rates.sampling and dashboard.rates.snapshot()["time"] == []
            rates = await eventually(lambda: len(dashboard.live_rates()["time"]) >= 2 and dashboard.rates.snapshot(),
                                     15, "two samples while watched")
            assert len(rates["in_tps"]) == len(rates["time"])
            await eventually(lambda: not dashboard.rates.sampling, 15, "sampling stopped, nobody looking")
            dashboard.live_rates()
            assert dashboard.rates.sampling  # a new look starts it again
        finally:
            await dashboard.stop()
        assert not dashboard.rates.sampling
    run_coroutine(main())
