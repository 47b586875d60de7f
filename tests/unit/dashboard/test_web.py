"""The JSON API's answers to bad input and to a NameServer that is not there: a clear reason,
the right status, and no broker touched. (tests/integration/test_dashboard_api.py has the
answers of a real cluster.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from skiff.client.errors import MessageValidationError, NoMasterError, NoRouteError
from skiff.dashboard.form import Form
from skiff.dashboard.service import topic_kind
from skiff.dashboard.web import _status_of, format_time_ms
from skiff.testing.dashboard import with_dashboard_client
from skiff.testing.processes import free_port


def with_client(test: Callable[[TestClient], Awaitable[Any]]) -> None:
    # A port nothing listens on: every call that reaches for the cluster fails to connect.
    with_dashboard_client(f"127.0.0.1:{free_port()}", test, sample_interval_s=60)


@pytest.mark.parametrize("method, path, body, error", [
    ("POST", "/api/topics", {}, "give topic"),
    ("POST", "/api/topics", {"topic": "bad topic"}, "the topic 'bad topic' has characters other than"),
    ("POST", "/api/topics", {"topic": "T", "queue_nums": "many"}, "queue_nums must be a whole number, not 'many'"),
    ("POST", "/api/topics", {"topic": "T", "queue_nums": 0}, "queue_nums must be between 1 and 1024, not 0"),
    ("POST", "/api/topics", {"topic": "T", "perm": 5}, "perm must be 2 (write), 4 (read) or 6 (both)"),
    ("POST", "/api/topics/T/send", {"body": " "}, "give body"),
    ("POST", "/api/topics/T/send", {"body": "x", "count": 5000}, "count must be between 1 and 1000, not 5000"),
    ("POST", "/api/groups/g/reset-offset", {"topic": "T", "timestamp": "yesterday"},
     "timestamp: 'yesterday' is not ms since the epoch, 'now' or an ISO time"),
    ("POST", "/api/resend", {"msg_id": "X"}, "give group"),
    ("POST", "/api/resend", {"msg_id": "X", "group": "a b"}, "group: the group name 'a b' has characters"),
    ("POST", "/api/groups/g/consume", {"topic": "T", "max_messages": -1}, "max_messages must be between 1 and 1000"),
    ("GET", "/api/messages?topic=T&begin=20&end=10", None, "begin is after end"),
    ("GET", "/api/message", None, "give msg_id"),
])
def test_bad_input_is_refused_with_the_reason(method: str, path: str, body: Any, error: str):
    async def test(client: TestClient) -> None:
        resp = await client.request(method, path, json=body)
        assert resp.status == 400
        assert (await resp.json())["error"].startswith(error)

    with_client(test)


def test_a_body_that_is_not_json_is_refused_and_only_json_is_read():
    async def test(client: TestClient) -> None:
        # a form or text/plain post is what another site's page can make a browser send unasked
        for data, content_type in ((b"topic=T", "application/x-www-form-urlencoded"), (b'{"topic": "T"}',
                                                                                        "text/plain")):
            resp = await client.post("/api/topics", data=data, headers={"Content-Type": content_type})
            assert (resp.status, (await resp.json())["error"]) == (
                400, f"send the body as application/json, not {content_type}")
        resp = await client.post("/api/topics", data=b"{topic", headers={"Content-Type": "application/json"})
        assert resp.status == 400
        assert (await resp.json())["error"].startswith("the body is not JSON")
        resp = await client.post("/api/topics", json=[1, 2])
        assert (resp.status, (await resp.json())["error"]) == (400, "the request body must be a JSON object")

    with_client(test)


def test_an_unreachable_name_server_is_a_bad_gateway_on_the_api_and_a_page_that_says_so():
    async def test(client: TestClient) -> None:
        resp = await client.get("/api/cluster")
        assert resp.status == 502
        assert "127.0.0.1" in (await resp.json())["error"]
        page = await client.get("/topics")
        assert page.status == 502
        html = await page.text()
        assert 'id="page-error"' in html and "<table" not in html

    with_client(test)


def test_pages_and_static_files_are_served_without_the_cluster():
    async def test(client: TestClient) -> None:
        for path in ("/messages", "/dlq"):  # nothing asked yet: the page is only the form
            resp = await client.get(path)
            assert resp.status == 200 and "<form" in await resp.text()
        chart = await client.get("/static/uplot/uPlot.iife.min.js")
        assert chart.status == 200 and "uPlot" in await chart.text()
        assert (await client.get("/static/dashboard.js")).status == 200

    with_client(test)


def test_topic_kinds():
    own = frozenset({"DefaultCluster", "broker-a"})
    assert [topic_kind(t, own) for t in ("Orders", "%RETRY%g", "%DLQ%g", "RMQ_SYS_TRACE_TOPIC", "TBW102",
                                         "DefaultCluster", "broker-a", "SELF_TEST_TOPIC")] == [
        "normal", "retry", "dlq", "system", "system", "system", "system", "system"]


def test_form_reads_times_flags_and_defaults():
    form = Form({"t": "2024-05-01T12:00:00+00:00", "n": 1714564800000, "on": "on", "blank": "  "})
    assert form.time_ms("t") == form.time_ms("n") == 1714564800000
    assert form.flag("on") and not form.flag("off")
    assert form.text("blank", "dflt") == "dflt"
    with pytest.raises(MessageValidationError, match="give blank"):
        form.text("blank")


def test_times_on_pages_are_utc():
    assert format_time_ms(1714564800123) == "2024-05-01 12:00:00.123Z"
    assert format_time_ms(0) == "-"


@pytest.mark.parametrize(("exc", "status"), [
    (NoMasterError("Orders", {"broker-a": "slaves only"}), 503),
    (NoRouteError("Orders"), 404),
    (MessageValidationError("the body is empty"), 400),
])
def test_errors_map_to_http_statuses(exc: Exception, status: int) -> None:
    """A topic whose group has no master now (a failover) is unavailable, not missing."""
    assert _status_of(exc) == status
