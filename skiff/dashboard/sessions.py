"""Logins for brokers with ACL on: each signed-in person gets a `Dashboard` whose clients sign
with that person's access key, so the brokers' own ACL decides what they may see and do.

The dashboard keeps no accounts of its own: a login is checked by one signed request
to every master (GET_BROKER_RUNTIME_INFO needs a valid signature and nothing more), and
a session is a random token in an HttpOnly cookie that maps to those clients. Whether a
login is needed at all is found out the same way, unsigned, and re-checked now and then,
so a dashboard follows a cluster whose ACL is turned on or off.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import secrets

from skiff.client.admin import AsyncAdmin
from skiff.client.credentials import Credentials
from skiff.client.errors import ClientError
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.errors import SkiffError
from skiff.dashboard.service import DASHBOARD_INSTANCE, Dashboard, DashboardConfig
from skiff.protocol.errors import NoPermissionError

SESSION_COOKIE = "skiff_session"
ACL_PROBE_EVERY_S = 30.0
"""How long the answer to "do brokers refuse unsigned requests?" is trusted."""


class LoginError(ClientError):
    """The keys are not accepted by the brokers (the reason is theirs; it never holds the secret)."""


@dataclasses.dataclass(slots=True)
class Session:
    dashboard: Dashboard
    used_at: float


class Sessions:
    def __init__(self, config: DashboardConfig, anonymous: Dashboard, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.anonymous = anonymous
        self.clock = clock
        self._sessions: dict[str, Session] = {}
        self._acl: tuple[float, bool] | None = None
        self._probe_lock = asyncio.Lock()
        self._numbers = itertools.count(1)

    async def login_required(self) -> bool:
        """True when brokers refuse the dashboard's own (unsigned or environment-signed) requests.
        A cluster that cannot be asked needs no login yet: the request itself then says what is wrong."""
        async with self._probe_lock:
            now = self.clock.monotonic()
            if self._acl is None or now - self._acl[0] > ACL_PROBE_EVERY_S:
                try:
                    self._acl = (now, await _refused(self.anonymous.admin))
                except SkiffError:
                    return False
            return self._acl[1]

    async def get(self, token: str | None) -> Dashboard | None:
        session = self._sessions.get(token or "")
        if session is None:
            return None
        if self.clock.monotonic() - session.used_at > self.config.session_idle_s:
            await self.logout(token)
            return None
        session.used_at = self.clock.monotonic()
        return session.dashboard

    async def login(self, access_key: str, secret_key: str) -> str:
        """A new session's token, once every master accepts the keys; `LoginError` if one does not."""
        # Each session its own client instance: one producer group may run once per instance.
        dashboard = Dashboard(self.config, Credentials(access_key, secret_key),
                              f"{DASHBOARD_INSTANCE}-session-{next(self._numbers)}")
        await dashboard.start()
        try:
            if await _refused(dashboard.admin):
                raise LoginError(f"the brokers refuse access key {access_key!r}: wrong key or secret, "
                                 f"or this host is not allowed")
        except BaseException:
            await dashboard.stop()
            raise
        await self._make_room()
        token = secrets.token_urlsafe(32)
        self._sessions[token] = Session(dashboard, self.clock.monotonic())
        return token

    async def _make_room(self) -> None:
        while len(self._sessions) >= self.config.sessions_max:
            oldest = min(self._sessions, key=lambda t: self._sessions[t].used_at)
            await self.logout(oldest)

    async def logout(self, token: str | None) -> None:
        session = self._sessions.pop(token or "", None)
        if session is not None:
            await session.dashboard.stop()

    async def stop(self) -> None:
        for token in list(self._sessions):
            await self.logout(token)


async def _refused(admin: AsyncAdmin) -> bool:
    """Whether some master answers NO_PERMISSION to a request that needs only a valid signature."""
    info = await admin.cluster_info()
    masters = [d.master_addr for d in info.broker_addr_table.values() if d.master_addr]
    answers = await asyncio.gather(*(admin.broker_runtime_info(a) for a in masters), return_exceptions=True)
    return any(isinstance(a, NoPermissionError) for a in answers)  # a broker that is away proves nothing
