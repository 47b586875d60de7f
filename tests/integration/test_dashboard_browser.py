"""The dashboard in a real browser: headless Chromium (Debian's, driven by Selenium through
the system chromedriver; `make chromium` installs both) against real NameServer, broker and
`skiff dashboard` processes. It walks the main flows a user takes, checks what each page
shows against what the test did, and saves a screenshot of each page to a temporary directory
(its path is printed; pytest -s shows it). Sign-in with ACL on is in test_dashboard_acl.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from skiff.client import Admin, ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from skiff.client._impl.config import ClientConfig
from skiff.testing.cluster import Cluster
from skiff.testing.processes import SkiffProcess, free_port, start_skiff
from skiff.testing.waits import wait_for
from tests.integration.dashboard_browser_kit import Page, browser, shots  # noqa: F401 - fixtures
from tests.interop.test_grpc_client import rmq5_python

HOLDER = Path(__file__).resolve().parents[1] / "interop" / "grpc" / "holder.py"

TOPIC, GROUP, DLQ_GROUP = "BrowserOrders", "browser-g", "browser-dlq"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    with Cluster(tmp_path_factory.mktemp("dashboard-browser"), broker_args=[f"--grpcServerPort={port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield c


@pytest.fixture(scope="module")
def dashboard(cluster: Cluster) -> Iterator[SkiffProcess]:
    with start_skiff(["dashboard", "-n", cluster.namesrv_addr, "--port", "0"]) as proc:
        yield proc


def test_main_flows_in_a_browser(cluster: Cluster, dashboard: SkiffProcess, browser: WebDriver, shots: Path):
    page = Page(browser, f"http://127.0.0.1:{dashboard.port}", shots)
    config = ClientConfig(cluster.namesrv_addr, "browser-test", client_ip="127.0.0.1")

    # create a topic
    page.open("/topics")
    page.fill("#topic-form", topic=TOPIC, queue_nums=2)
    page.wait_text("#topics", lambda t: TOPIC in t, "the new topic in the list", reload=True)
    page.shot("topics")

    # a group that has consumed the (empty) topic from the dashboard
    page.open(f"/groups/{GROUP}")
    page.fill("#consume-form", topic=TOPIC)
    assert page.result()["messages"] == []
    page.open(f"/groups/{GROUP}")
    assert page.text("#total-lag") == "0" and page.text("#lag").count(TOPIC) == 2

    # send from the topic page
    page.open(f"/topics/{TOPIC}")
    page.fill("#send-form", body='{"order": 1, "item": "oars"}', keys="order-1", tags="created")
    sent = page.result()["sent"]
    assert [s["status"] for s in sent] == ["SEND_OK"]

    # the lag rises live while the group page is open
    page.open(f"/groups/{GROUP}")
    assert page.text("#total-lag") == "1"
    with Producer("browser-pg", client_config=config) as producer:
        for i in range(2):
            producer.send(Message.of(TOPIC, f"plain text {i}".encode(), keys=[f"order-{i + 2}"]))
    page.wait_text("#total-lag", lambda t: t == "3", "the lag to rise to 3 on the open page")
    page.wait_text("#lag tbody", lambda t: sorted(line.split()[5] for line in t.splitlines()) == ["1", "2"],
                   "the lag per queue to follow")
    wait_for(lambda: int(browser.find_element(By.ID, "lag-chart").get_attribute("data-points") or 0) >= 3, 20,
             "three points on the lag chart")
    page.shot("group-lag")

    # consume from the dashboard: the lag falls
    page.fill("#consume-form", topic=TOPIC)
    consumed = page.result()["messages"]
    assert sorted(m["keys"][0] for m in consumed) == ["order-1", "order-2", "order-3"]
    page.wait_text("#total-lag", lambda t: t == "0", "the lag to fall to 0")

    # reset the offsets to ten minutes ago (before the topic existed): all three are lag again
    when = browser.find_element(By.CSS_SELECTOR, "#reset-form [name=timestamp]")
    browser.execute_script("const d = new Date(Date.now() - 600000 - new Date().getTimezoneOffset() * 60000);"
                           "arguments[0].value = d.toISOString().slice(0, 19);", when)
    browser.find_element(By.CSS_SELECTOR, "#reset-form button").click()
    page.wait_text("#total-lag", lambda t: t == "3", "the lag back at 3 after the reset", reload=True)
    page.open("/groups")
    row = page.wait_text(f"#groups tr:has(a[href='/groups/{GROUP}'])", bool, "the group in the list")
    assert row.split() == [GROUP, "0", TOPIC, "3", "0.0"]
    page.shot("groups")

    # query the message by key, open it: body preview and trace
    page.open("/messages")
    page.fill("#query-form", topic=TOPIC, key="order-1")
    page.wait_text("#messages", lambda t: sent[0]["msg_id"] in t, "the message found by key")
    browser.find_element(By.CSS_SELECTOR, "#messages a").click()
    assert page.text("#body-encoding") == "json"
    assert '"item": "oars"' in page.text("#body")
    page.wait_text("#trace", lambda t: "send by SKIFF_DASHBOARD_PRODUCER" in t,
                   "the send in the trace timeline", reload=True)
    page.shot("message")

    # dead letters: a group whose listener fails once goes straight to its DLQ (max 0 retries)
    delivered: list[tuple[str, str, int]] = []

    def listener(msgs: list[Any], ctx: Any) -> ConsumeStatus:
        for m in msgs:
            delivered.append((m.msg_id, m.topic, m.reconsume_times))
        return ConsumeStatus.RECONSUME_LATER if len(delivered) <= 3 else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(DLQ_GROUP, client_config=ClientConfig(cluster.namesrv_addr, "browser-dlq",
                                                                  client_ip="127.0.0.1"),
                            max_reconsume_times=0, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_for(lambda: len(delivered) >= 3, 30, "three failed deliveries")
        page.open(f"/dlq?group={DLQ_GROUP}")
        page.wait_text("#dlq", lambda t: t.count("Resend") == 3, "three dead letters", reload=True, timeout_s=30)
        assert page.text("#dlq").count(TOPIC) == 3
        page.shot("dlq")
        button = browser.find_element(By.CSS_SELECTOR, "#dlq button.resend")
        resent_id = json.loads(button.get_attribute("data-body"))["msg_id"]
        button.click()
        answer = page.result()
        assert (answer["topic"], answer["original_topic"], answer["status"]) == (f"%RETRY%{DLQ_GROUP}", TOPIC,
                                                                                 "SEND_OK")
        wait_for(lambda: len(delivered) >= 4, 30, "the resent dead letter delivered again")
        again = delivered[3]
        assert again[1] == TOPIC, "the group sees the resent message under its original topic"
        assert again[0] in {s["msg_id"] for s in sent} | {m["msg_id"] for m in consumed}
        assert resent_id and again[0] == answer["msg_id"]
        # its trace timeline: the send, the failed consumption, and the one after the resend
        page.open(f"/message?msg_id={resent_id}")
        page.wait_text("#trace", lambda t: t.count(f"consume by {DLQ_GROUP}") == 2 and f"to %RETRY%{DLQ_GROUP}" in t,
                       "both consumptions and the resend traced", reload=True, timeout_s=30)
        trace = page.text("#trace")
        assert trace.index("send by") < trace.index("consume by")
        assert trace.splitlines()[0].split()[2] == "+0"  # each event's time after the send
        assert f"to {TOPIC} on broker-a" in trace and f"to %RETRY%{DLQ_GROUP} on broker-a" in trace  # the resend
        assert "failed" in trace and "success" in trace
        page.shot("trace")
    finally:
        consumer.shutdown()

    # the cluster page: the broker and the live in/out chart
    page.open("/")
    assert "MASTER" in page.text("#brokers") and cluster.broker_addr() in page.text("#brokers")
    page.wait_text("#tps-chart", lambda t: int(browser.find_element(By.ID, "tps-chart").get_attribute(
        "data-points") or 0) >= 2, "two points on the rates chart")
    # the broker table as the page's poll redraws it (its cells have no title attribute): the uptime
    # readable, not RocketMQ's "[ 0 days, 0 hours, ... ]", and the trace messages counted apart
    page.wait_text("#brokers", lambda t: not browser.find_elements(By.CSS_SELECTOR, "#brokers td[title]"),
                   "the broker table redrawn by the poll")
    head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#brokers thead th")]
    row = dict(zip(head, (td.text for td in browser.find_elements(By.CSS_SELECTOR, "#brokers tbody tr td"))))
    assert re.fullmatch(r"\d+ (s|min|h|d)( \d+ (min|s|h))?", row["Up"]), row
    assert int(row["Trace put"]) > 0 and int(row["Put total"]) > 0, row
    page.shot("cluster")
    page.open("/timer")
    assert "Nothing scheduled." in page.text("main")

    # more queues from the topic page, then delete the topic from the list (after confirming)
    page.open(f"/topics/{TOPIC}")
    page.fill("#topic-form", queue_nums=3, read_queue_nums=3)
    page.wait_text("#route", lambda t: "broker-a 3 3 6" in t, "the route with three queues", reload=True)
    page.open("/topics")
    browser.find_element(By.XPATH, f"//tr[td/a[text()='{TOPIC}']]//button").click()
    browser.switch_to.alert.accept()
    page.wait_text("#topics", lambda t: TOPIC not in t, "the topic gone from the list", reload=True)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_a_grpc_consumer_group_online_with_its_lag(cluster: Cluster, dashboard: SkiffProcess, browser: WebDriver,
                                                  shots: Path, tmp_path: Path):
    """The complaint about rocketmq-dashboard: a 5.x (gRPC) client's group shows offline, its
    lag -1. Here the official 5.x Python client holds a SimpleConsumer of a group with a backlog
    of 5 and 2 of them received, not acknowledged: the pages show the group with its member
    (client id, language, the client's own version 5.1.2) and its lag, messages not yet popped plus
    those in flight."""
    topic, group, backlog, taken = "BrowserGrpc", "browser-grpc-g", 5, 2
    python = rmq5_python()
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic(topic, queue_nums=1)
    config = ClientConfig(cluster.namesrv_addr, "browser-grpc", client_ip="127.0.0.1")
    with Producer("browser-grpc-pg", client_config=config) as producer:
        for i in range(backlog):
            producer.send(Message.of(topic, f"g{i}".encode()))
    spec = {"endpoint": cluster.grpc_endpoint, "group": group, "topic": topic,  # type: ignore[attr-defined]
            "take": taken, "invisible_s": 300}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HOME": str(tmp_path)}  # logs in $HOME/logs
    errors = tmp_path / "holder.err"  # a file, not a pipe nobody drains while the page is checked
    with errors.open("w") as err:
        holder = subprocess.Popen([python, str(HOLDER), json.dumps(spec)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path, env=env)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line, f"the 5.x consumer failed:\n{errors.read_text()[-4000:]}"
        held = json.loads(line)
        assert len(held["bodies"]) == taken and set(held["bodies"]) <= {f"g{i}" for i in range(backlog)}, held

        page = Page(browser, f"http://127.0.0.1:{dashboard.port}", shots)
        page.open(f"/groups/{group}")
        page.wait_text("#total-lag", lambda t: t == str(backlog), "the gRPC group's lag: 3 not popped + 2 in flight",
                       reload=True)
        head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#lag thead th")]
        [queue] = [dict(zip(head, (td.text for td in tr.find_elements(By.TAG_NAME, "td"))))
                   for tr in browser.find_elements(By.CSS_SELECTOR, "#lag tbody tr")]
        assert (queue["Topic"], queue["Lag"], queue["In flight"]) == (topic, str(backlog), str(taken)), queue
        members = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                   for tr in browser.find_elements(By.CSS_SELECTOR, "#members tr")[1:]]
        assert [(m[0], m[2], m[3]) for m in members] == [(held["client_id"], "PYTHON", "V5_1_2")], members
        page.shot("grpc-group")

        page.open("/groups")
        row = page.wait_text(f"#groups tr:has(a[href='/groups/{group}'])", bool, "the gRPC group in the list")
        assert row.split() == [group, "1", topic, str(backlog), "0.0"]
    finally:
        if holder.stdin:
            holder.stdin.close()
        try:
            holder.wait(timeout=30)
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
            if holder.stdout:
                holder.stdout.close()
