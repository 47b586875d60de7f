"""A slave's copy of its master's users and ACLs, taken with the rest of the metadata each sync
round (`skiff.broker.ha.sync`): RocketMQ keeps one RocksDB per broker and replicates nothing,
so a slave that takes over would check against whatever it was last told by hand.

The master is asked with RocketMQ's own list requests (AUTH_LIST_USER, AUTH_LIST_ACL, which
answer passwords too), signed with the broker's inner credentials when ACL 2.0 is on. The slave
takes the whole table when it differs from its own, as one snapshot (`AuthStore.adopt`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from skiff.broker.auth.model import AuthDataError
from skiff.broker.auth.service import AuthService
from skiff.broker.auth.store import AuthData, AuthStore
from skiff.protocol import fastjson
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import AuthRequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

TIMEOUT_MS = 3_000


class AuthReplica:
    def __init__(self, store: AuthStore, client: RemotingClient, sign: Callable[[RemotingCommand], None]) -> None:
        self.store = store
        self.client = client
        self.sign = sign

    async def __call__(self, addr: str) -> None:
        users = await self._list(addr, AuthRequestCode.AUTH_LIST_USER)
        acls = await self._list(addr, AuthRequestCode.AUTH_LIST_ACL)
        if users is None or acls is None:
            return
        try:
            master = AuthData.from_json({"users": users, "acls": acls}, f"the users and ACLs of the master {addr}")
        except AuthDataError as exc:
            log.error("not copied: %s", exc)
            return
        mine = self.store.data
        if master.users != mine.users or master.acls != mine.acls:
            self.store.adopt(master)
            log.info("copied %d users and %d ACLs from the master %s", len(master.users), len(master.acls), addr)

    async def _list(self, addr: str, code: AuthRequestCode) -> Any:
        cmd = RemotingCommand.request(code, {})
        self.sign(cmd)
        resp = await self.client.invoke(addr, cmd, TIMEOUT_MS)
        if resp.code != ResponseCode.SUCCESS:
            log.warning("the master %s answered %s to %s: %s (users and ACLs not copied)", addr, resp.code,
                        code.name, resp.remark)
            return None
        return fastjson.loads(bytes(resp.body)) if resp.body else []


class SyncHooks(Protocol):
    """What a slave's metadata sync lets others add (`skiff.broker.ha.sync.SlaveSynchronizer`)."""

    steps: list[Callable[[str], Awaitable[None]]]
    sign: Callable[[RemotingCommand], None]


def replicate_auth(sync: SyncHooks, auth: AuthService, client: RemotingClient) -> None:
    """Sign the slave's sync requests with the inner credentials (when set) and copy the users and
    ACLs each round."""
    keys = auth.inner_credentials()
    if keys is not None:
        access_key, secret_key = keys
        sync.sign = lambda cmd: sign_command(cmd, access_key, secret_key)
    sync.steps.append(AuthReplica(auth.store, client, sync.sign))
