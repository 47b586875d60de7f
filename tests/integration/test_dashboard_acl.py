"""The dashboard in front of brokers with ACL on: nothing without signing in, a sign-in checked
by the brokers, and each person's actions allowed or refused by their own account."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from skiff.testing.cluster import Cluster
from skiff.testing.dashboard import api_call as call
from skiff.testing.dashboard import with_dashboard_client
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
