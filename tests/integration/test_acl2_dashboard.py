"""The dashboard's users and policies page against brokers with ACL 2.0: a Super user signs in,
creates a user and gives them a policy entry (in a headless Chromium, through the page's forms);
the new user then signs in and is allowed and refused by that entry; the sign-in stays required."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from skiff.testing.cluster import Cluster
from skiff.testing.dashboard import api_call as call
from skiff.testing.dashboard import with_dashboard_client
from skiff.testing.processes import start_skiff
from tests.integration.dashboard_browser_kit import Page, browser, shots  # noqa: F401 - fixtures

pytestmark = pytest.mark.xdist_group("acl2-dashboard")

ARGS = ["--authenticationEnabled=true", "--authorizationEnabled=true",
        '--initAuthenticationUser={"username":"root","password":"root-secret-1"}']


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("acl2-dashboard"), broker_args=ARGS) as c:
        yield c


async def sign_in(client: TestClient, access_key: str, secret_key: str, status: int = 200) -> None:
    await call(client, "POST", "/api/login", {"access_key": access_key, "secret_key": secret_key}, status=status)


def test_users_and_policies_through_the_api(cluster: Cluster) -> None:
    async def test(client: TestClient) -> None:
        assert "sign in" in (await call(client, "GET", "/api/users", status=401))["error"]
        await sign_in(client, "root", "root-secret-1")
        await call(client, "POST", "/api/topics", {"topic": "DashAcl", "queue_nums": 1})
        await call(client, "POST", "/api/users", {"username": "ops", "password": "ops-secret-1"})
        await call(client, "POST", "/api/acls", {"username": "ops", "resources": "Topic:DashAcl,Cluster:*",
                                                  "actions": "Pub,Get,List", "decision": "Allow"})
        page = await call(client, "GET", "/api/users")
        assert {u["username"] for u in page["users"]} == {"root", "ops"}
        assert all("password" not in u for u in page["users"])
        assert {(e["subject"], e["resource"], e["decision"]) for e in page["entries"]} == {
            ("User:ops", "Topic:DashAcl", "Allow"), ("User:ops", "Cluster:*", "Allow")}

        await sign_in(client, "ops", "ops-secret-1")
        sent = (await call(client, "POST", "/api/topics/DashAcl/send", {"body": "from-ops"}))["sent"]
        assert [s["status"] for s in sent] == ["SEND_OK"]
        refused = await call(client, "POST", "/api/users", {"username": "x", "password": "y"}, status=403)
        assert "User:ops has no permission for Update on Cluster:DefaultCluster" in refused["error"]

        await sign_in(client, "root", "root-secret-1")
        await call(client, "POST", "/api/users/ops/status", {"status": "disable"})
        await sign_in(client, "ops", "ops-secret-1", status=401)
        await call(client, "POST", "/api/acls/delete", {"subject": "User:ops", "resource": "Cluster:*"})
        await call(client, "DELETE", "/api/users/ops")
        assert [u["username"] for u in (await call(client, "GET", "/api/users"))["users"]] == ["root"]
    with_dashboard_client(cluster.namesrv_addr, test)


@pytest.mark.slow
def test_users_page_in_a_browser(cluster: Cluster, browser: WebDriver, shots: Path) -> None:
    with start_skiff(["dashboard", "-n", cluster.namesrv_addr, "--port", "0"]) as dashboard:
        page = Page(browser, f"http://127.0.0.1:{dashboard.port}", shots)
        page.open("/users")
        assert browser.current_url.endswith("/login?next=/users")
        page.fill("#login-form", access_key="root", secret_key="root-secret-1")
        page.wait_text("h1", lambda t: t == "Users and policies", "the users page after signing in")
        page.fill("#user-form", username="web-user", password="web-secret-1")
        page.wait_text("#users", lambda t: "web-user Normal enable" in t, "the new user in the table")
        page.fill("#entry-form", username="web-user", resources="Topic:Web*", actions="Sub", source_ips="10.0.0.0/8")
        entries = page.wait_text("#entries", lambda t: "Topic:Web*" in t, "the new entry in the table")
        assert "User:web-user Custom Topic:Web* Sub 10.0.0.0/8 Allow" in entries
        assert "web-secret-1" not in browser.page_source
        page.shot("acl2-users")
        browser.find_element(By.CSS_SELECTOR, "#users tr:nth-child(3) button").click()  # Disable (row 1: header)
        page.wait_text("#users", lambda t: "web-user Normal disable" in t, "the user disabled")
