"""Users and ACLs (ACL 2.0, docs/acl.md) through the admin client: RocketMQ 5.3's
AUTH_* requests, as mqadmin's createUser ... listAcl send them.

Changes go to every master of the cluster (or the one broker named); each master's slaves copy
its users and ACLs with the rest of its metadata. Reads ask the first master. Users are
RocketMQ's UserInfo (``username``, ``password``, ``userType``, ``userStatus``) and ACLs its
AclInfo (``subject``, ``policies`` of ``policyType`` and ``entries`` of ``resource``,
``actions``, ``sourceIps``, ``decision``), as dicts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from skiff.protocol.codes import AuthRequestCode as A

if TYPE_CHECKING:
    from skiff.client._impl.instance import ClientInstance

Json = dict[str, Any]


class UserAdmin:
    """The user and ACL half of `AsyncAdmin` (a mixin: it uses the admin's broker lookup)."""

    _masters: Callable[..., Awaitable[dict[str, str]]]

    @property
    def _inst(self) -> ClientInstance:
        raise NotImplementedError

    async def _each_master(self, code: A, ext: dict[str, str], body: Any, cluster: str | None,
                           broker_addr: str | None) -> list[str]:
        masters = await self._masters(cluster, broker_addr)
        await asyncio.gather(*(self._inst.api.auth_request(a, code, ext, body) for a in masters.values()))
        return list(masters.values())

    async def _first_master(self, code: A, ext: dict[str, str], cluster: str | None, broker_addr: str | None) -> Any:
        masters = await self._masters(cluster, broker_addr)
        return await self._inst.api.auth_request(next(iter(masters.values())), code, ext)

    async def create_user(self, username: str, password: str, *, user_type: str = "Normal",
                          cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """A new user (``user_type`` Normal or Super; only a Super user may make a Super user)."""
        body = {"username": username, "password": password, "userType": user_type}
        return await self._each_master(A.AUTH_CREATE_USER, {"username": username}, body, cluster, broker_addr)

    async def update_user(self, username: str, *, password: str | None = None, user_type: str | None = None,
                          user_status: str | None = None, cluster: str | None = None,
                          broker_addr: str | None = None) -> list[str]:
        """Change only what is given (``user_status``: enable or disable)."""
        body = {k: v for k, v in (("username", username), ("password", password), ("userType", user_type),
                                  ("userStatus", user_status)) if v}
        return await self._each_master(A.AUTH_UPDATE_USER, {"username": username}, body, cluster, broker_addr)

    async def delete_user(self, username: str, *, cluster: str | None = None,
                          broker_addr: str | None = None) -> list[str]:
        """The user and their ACL."""
        return await self._each_master(A.AUTH_DELETE_USER, {"username": username}, None, cluster, broker_addr)

    async def get_user(self, username: str, *, cluster: str | None = None, broker_addr: str | None = None) -> Json:
        result: Json = await self._first_master(A.AUTH_GET_USER, {"username": username}, cluster, broker_addr)
        return result

    async def users(self, name_filter: str = "", *, cluster: str | None = None,
                    broker_addr: str | None = None) -> list[Json]:
        return list(await self._first_master(A.AUTH_LIST_USER, {"filter": name_filter}, cluster, broker_addr) or [])

    async def set_acl(self, subject: str, resources: Sequence[str], actions: Sequence[str], decision: str, *,
                      source_ips: Sequence[str] = (), policy_type: str = "Custom", create: bool = False,
                      cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """One entry per resource in ``subject``'s policy of ``policy_type``, replacing the
        entries of those resources (mqadmin createAcl with ``create``, else updateAcl: the broker
        merges both alike; the user must exist)."""
        entries = [{"resource": r, "actions": list(actions), "sourceIps": list(source_ips), "decision": decision}
                   for r in resources]
        body = {"subject": subject, "policies": [{"policyType": policy_type, "entries": entries}]}
        code = A.AUTH_CREATE_ACL if create else A.AUTH_UPDATE_ACL
        return await self._each_master(code, {"subject": subject}, body, cluster, broker_addr)

    async def delete_acl(self, subject: str, resource: str | None = None, *, policy_type: str = "Custom",
                         cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """Without ``resource`` the subject's whole ACL, else that entry."""
        ext = {"subject": subject, "policyType": policy_type, "resource": resource or ""}
        return await self._each_master(A.AUTH_DELETE_ACL, ext, None, cluster, broker_addr)

    async def get_acl(self, subject: str, *, cluster: str | None = None, broker_addr: str | None = None) -> Json:
        result: Json = await self._first_master(A.AUTH_GET_ACL, {"subject": subject}, cluster, broker_addr)
        return result

    async def acls(self, subject_filter: str = "", resource_filter: str = "", *, cluster: str | None = None,
                   broker_addr: str | None = None) -> list[Json]:
        ext = {"subjectFilter": subject_filter, "resourceFilter": resource_filter}
        return list(await self._first_master(A.AUTH_LIST_ACL, ext, cluster, broker_addr) or [])


USER_ADMIN_METHODS = ("create_user", "update_user", "delete_user", "get_user", "users", "set_acl", "delete_acl",
                      "get_acl", "acls")
