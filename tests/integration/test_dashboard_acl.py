"""The dashboard in front of brokers with ACL on: nothing without signing in, a sign-in checked
by the brokers, and each person's actions allowed or refused by their own account; through
the JSON API and in a headless Chromium (tests/integration/dashboard_browser_kit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from skiff.common.clock import ManualClock
from skiff.dashboard.sessions import SESSION_COOKIE
from skiff.testing.cluster import Cluster
from skiff.testing.dashboard import api_call as call
from skiff.testing.dashboard import with_dashboard_client
from skiff.testing.processes import start_skiff
from tests.integration.dashboard_browser_kit import Page, browser, shots  # noqa: F401 - fixtures
from tests.integration.test_acl import ACL  # app-user: Open=PUB|SUB, others DENY; admin-user: admin


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    conf = tmp_path_factory.mktemp("dashboard-acl-conf") / "plain_acl.yml"
    conf.write_text(ACL.format(denied="DENY"))
    args = ["--aclEnable=true", f"--plainAclFile={conf}"]
    with Cluster(tmp_path_factory.mktemp("dashboard-acl"), broker_args=args) as c:
        yield c


async def sign_in(client: TestClient, access_key: str, secret_key: str) -> None:
    assert (await call(client, "POST", "/api/login", {"access_key": access_key, "secret_key": secret_key})) == {
        "access_key": access_key}


def test_sign_in_is_needed_checked_by_the_brokers_and_acts_as_the_account(cluster: Cluster):
    async def test(client: TestClient) -> None:
        refused = await call(client, "GET", "/api/topics", status=401)
        assert "sign in" in refused["error"]
        page = await client.get("/groups", allow_redirects=False)
        assert (page.status, page.headers["Location"]) == (303, "/login?next=/groups")
        assert (await client.get("/login")).status == 200

        wrong = await call(client, "POST", "/api/login", {"access_key": "admin-user", "secret_key": "guess"},
                           status=401)
        assert "admin-user" in wrong["error"] and "guess" not in wrong["error"]
        await call(client, "GET", "/api/topics", status=401)

        await sign_in(client, "app-user", "app-secret-1")
        assert (await client.get("/topics")).status == 200
        assert "Signed in as" in await (await client.get("/topics")).text()
        denied = await call(client, "POST", "/api/topics", {"topic": "Open", "queue_nums": 1}, status=403)
        assert "app-user" in denied["error"] and "app-secret-1" not in denied["error"]

        await sign_in(client, "admin-user", "admin-secret-1")
        await call(client, "POST", "/api/topics", {"topic": "Open", "queue_nums": 1})
        brokers = (await call(client, "GET", "/api/cluster"))["brokers"]
        assert [(b["addr"], b["error"]) for b in brokers] == [(cluster.broker_addr(), None)]

        await sign_in(client, "app-user", "app-secret-1")
        sent = (await call(client, "POST", "/api/topics/Open/send", {"body": "hello"}))["sent"]
        assert [s["status"] for s in sent] == ["SEND_OK"]
        await call(client, "POST", "/api/logout")
        await call(client, "GET", "/api/topics", status=401)

    with_dashboard_client(cluster.namesrv_addr, test)


def test_sessions_end_when_idle_and_past_the_cap(cluster: Cluster):
    clock = ManualClock()

    async def test(client: TestClient) -> None:
        await sign_in(client, "app-user", "app-secret-1")
        clock.advance(59_000)
        await call(client, "GET", "/api/topics")  # used: the idle time starts again
        clock.advance(59_000)
        await call(client, "GET", "/api/topics")
        clock.advance(61_000)
        await call(client, "GET", "/api/topics", status=401)

        tokens = []
        for _ in range(3):  # three browsers; two sessions at most
            client.session.cookie_jar.clear()
            await sign_in(client, "app-user", "app-secret-1")
            tokens.append(next(c.value for c in client.session.cookie_jar if c.key == SESSION_COOKIE))
            clock.advance(1_000)
        for token, status in zip(tokens, (401, 200, 200)):
            client.session.cookie_jar.clear()
            client.session.cookie_jar.update_cookies({SESSION_COOKIE: token})
            await call(client, "GET", "/api/topics", status=status)

    with_dashboard_client(cluster.namesrv_addr, test, clock=clock, session_idle_s=60.0, sessions_max=2)


@pytest.mark.slow
def test_sign_in_in_a_browser(cluster: Cluster, browser: WebDriver, shots: Path):
    with start_skiff(["dashboard", "-n", cluster.namesrv_addr, "--port", "0"]) as dashboard:
        page = Page(browser, f"http://127.0.0.1:{dashboard.port}", shots)
        page.open("/topics")
        assert browser.current_url.endswith("/login?next=/topics")
        page.fill("#login-form", access_key="app-user", secret_key="wrong-secret")
        assert "the brokers refuse access key 'app-user'" in page.wait_text("#flash", bool, "the refusal")
        page.fill("#login-form", access_key="app-user", secret_key="app-secret-1")
        page.wait_text("h1", lambda t: t == "Topics", "the topics page after signing in")
        assert page.text("#user") == "app-user"
        page.fill("#topic-form", topic="Open", queue_nums=1)
        refusal = page.wait_text("#flash", bool, "the broker's refusal of a non-admin")
        assert refusal.startswith("NO_PERMISSION (16):") and "'app-user'" in refusal
        page.shot("acl-refused")
        browser.find_element(By.ID, "logout").click()
        page.wait_text("h1", lambda t: t == "Sign in", "the sign-in page after signing out")
