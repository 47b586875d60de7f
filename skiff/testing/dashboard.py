"""The dashboard's web app in this process, for tests of its JSON API (aiohttp's test client)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.dashboard.service import Dashboard, DashboardConfig
from skiff.dashboard.sessions import Sessions
from skiff.dashboard.web import build_app
from skiff.transport.loop import run_coroutine


def with_dashboard_client(namesrv_addr: str, test: Callable[[TestClient], Awaitable[Any]], *,
                          clock: Clock = SYSTEM_CLOCK, sample_interval_s: float = 0.2, **config: Any) -> None:
    """Run ``test(client)`` against a started dashboard for ``namesrv_addr`` (``config``: more
    `DashboardConfig` fields; ``clock`` times the sign-in sessions); stop both after."""
    async def main() -> None:
        dashboard = Dashboard(DashboardConfig(namesrv_addr, sample_interval_s=sample_interval_s, **config))
        await dashboard.start()
        sessions = Sessions(dashboard.config, dashboard, clock)
        client = TestClient(TestServer(build_app(sessions)))
        await client.start_server()
        try:
            await test(client)
        finally:
            await client.close()
            await sessions.stop()
            await dashboard.stop()

    run_coroutine(main())


async def api_call(client: TestClient, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    """The JSON answer of one API call, after checking its status (redirects are not followed)."""
    resp = await client.request(method, path, json=body, allow_redirects=False)
    data = await resp.json()
    assert resp.status == status, data
    return data
