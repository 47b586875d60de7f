"""DashboardServer: the dashboard's clients and its HTTP listener, with explicit start and stop
(`skiff dashboard` runs one alone, `skiff up` beside its broker)."""

from __future__ import annotations

import logging

from aiohttp import web

from skiff.common.errors import ConfigError, SkiffError
from skiff.dashboard import DEFAULT_PORT
from skiff.dashboard.service import Dashboard, DashboardConfig
from skiff.dashboard.sessions import Sessions
from skiff.dashboard.web import build_app

log = logging.getLogger("skiff.dashboard")


class DashboardError(SkiffError):
    """The dashboard cannot listen where it was asked to."""


class DashboardServer:
    def __init__(self, config: DashboardConfig, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        if not 0 <= port < 65536:
            raise ConfigError(f"dashboard port {port} is not a port (0 picks a free one)")
        self.config = config
        self.host = host
        self.port = port
        self.dashboard = Dashboard(config)
        self.sessions = Sessions(config, self.dashboard)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    async def start(self) -> None:
        await self.dashboard.start()
        runner = web.AppRunner(build_app(self.sessions), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            await self.dashboard.stop()
            raise DashboardError(f"the dashboard cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("skiff dashboard listening on %s:%d: open %s (NameServer %s)", self.host, self.port, self.url,
                 self.config.namesrv_addr)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
            await self.sessions.stop()
            await self.dashboard.stop()
