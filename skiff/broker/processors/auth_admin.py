"""RocketMQ 5.3's user and ACL admin requests (mqadmin createUser ... listAcl; `skiff user`,
`skiff acl`), served whether or not ACL 2.0 is switched on, so users can be made first.

| code | request          | ext fields                              | body                       |
|------|------------------|-----------------------------------------|----------------------------|
| 3001 | AUTH_CREATE_USER | username                                | UserInfo                   |
| 3002 | AUTH_UPDATE_USER | username                                | UserInfo (non-empty fields applied) |
| 3003 | AUTH_DELETE_USER | username                                | -                          |
| 3004 | AUTH_GET_USER    | username                                | answer: UserInfo           |
| 3005 | AUTH_LIST_USER   | filter (a part of the name)             | answer: [UserInfo]         |
| 3006 | AUTH_CREATE_ACL  | subject                                 | AclInfo (merged, as update)|
| 3007 | AUTH_UPDATE_ACL  | subject                                 | AclInfo                    |
| 3008 | AUTH_DELETE_ACL  | subject, policyType, resource           | -                          |
| 3009 | AUTH_GET_ACL     | subject                                 | answer: AclInfo            |
| 3010 | AUTH_LIST_ACL    | subjectFilter, resourceFilter           | answer: [AclInfo]          |

Answers carry the password, as RocketMQ's (only a user allowed Cluster Get reads them; a slave
copies its master's users through these). Only a Super caller (the request's ``AccessKey``) may
make a Super user or change or delete one (RocketMQ's rule; a request without ``AccessKey`` is
let through it, as upstream, when authentication is off). Errors: NO_PERMISSION for those,
SYSTEM_ERROR with the reason for anything else (a missing user, a malformed body).
"""

from __future__ import annotations

import logging
from typing import Any

from skiff.broker.auth.model import Acl, AuthDataError, PolicyType, Resource, User, UserType, parse_subject
from skiff.broker.auth.store import AuthStore
from skiff.protocol import fastjson
from skiff.protocol.acl_sign import ACCESS_KEY
from skiff.protocol.codes import AuthRequestCode as A
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport.connection import Connection, Handler

log = logging.getLogger(__name__)


class NotSuper(Exception):
    """A change to a Super user by a caller who is not one."""


class AuthAdminProcessor:
    def __init__(self, store: AuthStore) -> None:
        self.store = store

    def handlers(self) -> dict[int, Handler]:
        table = {A.AUTH_CREATE_USER: self.create_user, A.AUTH_UPDATE_USER: self.update_user,
                 A.AUTH_DELETE_USER: self.delete_user, A.AUTH_GET_USER: self.get_user,
                 A.AUTH_LIST_USER: self.list_users, A.AUTH_CREATE_ACL: self.put_acl, A.AUTH_UPDATE_ACL: self.put_acl,
                 A.AUTH_DELETE_ACL: self.delete_acl, A.AUTH_GET_ACL: self.get_acl, A.AUTH_LIST_ACL: self.list_acls}
        return {int(code): self._answering(fn) for code, fn in table.items()}

    def _answering(self, fn: Any) -> Handler:
        def handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            try:
                body = fn(cmd, cmd.ext_fields or {})
            except NotSuper as exc:
                return cmd.response(ResponseCode.NO_PERMISSION, str(exc))
            except (AuthDataError, fastjson.JsonDecodeError) as exc:
                return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
            if body is not None:
                return cmd.response(body=fastjson.dumps(body))
            return cmd.response()
        return handler

    def _caller_is_super(self, ext: dict[str, str]) -> bool:
        name = ext.get(ACCESS_KEY)
        if not name:
            return True
        user = self.store.user(name)
        return user is not None and user.type is UserType.SUPER

    def _super_only(self, ext: dict[str, str], what: str) -> None:
        if not self._caller_is_super(ext):
            raise NotSuper(f"only a Super user may {what}")

    # -- users --------------------------------------------------------------------

    def create_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> None:
        user = User.from_json(_body(cmd), ext.get("username") or None)
        if user.type is UserType.SUPER:
            self._super_only(ext, f"create the Super user {user.username!r}")
        self.store.create_user(user)
        log.info("user %s created (%s)", user.username, user.type.title)

    def update_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> None:
        raw = _body(cmd)
        name = ext.get("username") or str(raw.get("username") or "")
        old = self.store.user(name)
        if old is not None and (old.type is UserType.SUPER or str(raw.get("userType", "")).lower() == "super"):
            self._super_only(ext, f"change the user {name!r} to or from Super")
        self.store.update_user(name, raw)
        log.info("user %s updated", name)

    def delete_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> None:
        name = ext.get("username", "")
        old = self.store.user(name)
        if old is not None and old.type is UserType.SUPER:
            self._super_only(ext, f"delete the Super user {name!r}")
        self.store.delete_user(name)
        log.info("user %s deleted", name)

    def get_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> dict[str, Any]:
        name = ext.get("username", "")
        user = self.store.user(name)
        if user is None:
            raise AuthDataError(f"user {name!r} does not exist")
        return user.to_json()

    def list_users(self, cmd: RemotingCommand, ext: dict[str, str]) -> list[dict[str, Any]]:
        part = ext.get("filter") or ""
        return [u.to_json() for name, u in sorted(self.store.data.users.items()) if part in name]

    # -- ACLs ---------------------------------------------------------------------

    def put_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> None:
        acl = Acl.from_json(_body(cmd), ext.get("subject") or None)
        merged = self.store.put_acl(acl)
        log.info("ACL of %s set: %d policies", merged.subject, len(merged.policies))

    def delete_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> None:
        subject = parse_subject(ext.get("subject"))
        ptype = PolicyType.parse(ext.get("policyType") or "Custom", "policyType")
        resource = Resource.parse(ext["resource"]) if ext.get("resource") else None
        self.store.delete_acl(subject, ptype, resource)
        log.info("ACL of %s: %s deleted", subject, resource.key if resource else "all")

    def get_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> dict[str, Any]:
        subject = parse_subject(ext.get("subject"))
        acl = self.store.acl(subject)
        if acl is None:
            raise AuthDataError(f"{subject} has no ACL")
        return acl.to_json()

    def list_acls(self, cmd: RemotingCommand, ext: dict[str, str]) -> list[dict[str, Any]]:
        subjects, resources = ext.get("subjectFilter") or "", ext.get("resourceFilter") or ""
        out = []
        for subject, acl in sorted(self.store.data.acls.items()):
            if subjects not in subject:
                continue
            if resources and not any(resources in e.resource.key for p in acl.policies.values() for e in p.entries):
                continue
            out.append(acl.to_json())
        return out


def _body(cmd: RemotingCommand) -> dict[str, Any]:
    if not cmd.body:
        raise AuthDataError("the request has no body")
    raw = fastjson.loads(bytes(cmd.body))
    if not isinstance(raw, dict):
        raise AuthDataError("the body is not a JSON object")
    return raw
