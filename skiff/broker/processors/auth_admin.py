"""RocketMQ 5.3's user and ACL admin requests (mqadmin createUser ... listAcl; `skiff user`,
`skiff acl`): the adapter of `AuthAdminOperation`, which holds the rules and the refusals.

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

A request this door cannot decode (no body, a malformed one, a bad subject, policy type or
resource) is SYSTEM_ERROR with the reason, as the operation's own refusals are; a Super caller
is the request's ``AccessKey``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skiff.broker.auth.model import Acl, AuthDataError, PolicyType, Resource, User, parse_subject
from skiff.broker.operations.auth import AclDeletion, AuthAdminOperation, UserChange
from skiff.broker.operations.refusal import Refusal
from skiff.protocol import fastjson
from skiff.protocol.acl_sign import ACCESS_KEY
from skiff.protocol.codes import AuthRequestCode as A
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport.connection import Connection, Handler

Outcome = User | Acl | list[User] | list[Acl] | Refusal | None
"""What an operation answered: a user or ACL, a list of them, a refusal, or nothing (done)."""


class AuthAdminProcessor:
    def __init__(self, operation: AuthAdminOperation) -> None:
        self.operation = operation

    def handlers(self) -> dict[int, Handler]:
        table = {A.AUTH_CREATE_USER: self.create_user, A.AUTH_UPDATE_USER: self.update_user,
                 A.AUTH_DELETE_USER: self.delete_user, A.AUTH_GET_USER: self.get_user,
                 A.AUTH_LIST_USER: self.list_users, A.AUTH_CREATE_ACL: self.put_acl, A.AUTH_UPDATE_ACL: self.put_acl,
                 A.AUTH_DELETE_ACL: self.delete_acl, A.AUTH_GET_ACL: self.get_acl, A.AUTH_LIST_ACL: self.list_acls}
        return {int(code): _answering(fn) for code, fn in table.items()}

    # -- users --------------------------------------------------------------------

    def create_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        user = User.from_json(_body(cmd), ext.get("username") or None)
        return self.operation.create_user(user, ext.get(ACCESS_KEY))

    def update_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        raw = _body(cmd)
        name = ext.get("username") or str(raw.get("username") or "")
        updated = self.operation.update_user(UserChange(name, raw), ext.get(ACCESS_KEY))
        return updated if isinstance(updated, Refusal) else None

    def delete_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        return self.operation.delete_user(ext.get("username", ""), ext.get(ACCESS_KEY))

    def get_user(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        return self.operation.user(ext.get("username", ""))

    def list_users(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        return self.operation.users(ext.get("filter") or "")

    # -- ACLs ---------------------------------------------------------------------

    def put_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        merged = self.operation.put_acl(Acl.from_json(_body(cmd), ext.get("subject") or None))
        return merged if isinstance(merged, Refusal) else None

    def delete_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        subject = parse_subject(ext.get("subject"))
        ptype = PolicyType.parse(ext.get("policyType") or "Custom", "policyType")
        resource = Resource.parse(ext["resource"]) if ext.get("resource") else None
        return self.operation.delete_acl(AclDeletion(subject, ptype, resource))

    def get_acl(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        return self.operation.acl(parse_subject(ext.get("subject")))

    def list_acls(self, cmd: RemotingCommand, ext: dict[str, str]) -> Outcome:
        return self.operation.acls(ext.get("subjectFilter") or "", ext.get("resourceFilter") or "")


def _answering(fn: Callable[[RemotingCommand, dict[str, str]], Outcome]) -> Handler:
    """The handler of one request: decode and call (``fn``), then encode what came back."""
    def handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            outcome = fn(cmd, cmd.ext_fields or {})
        except (AuthDataError, fastjson.JsonDecodeError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        if isinstance(outcome, Refusal):
            return cmd.response(outcome.code, outcome.reason)
        if outcome is None:
            return cmd.response()
        body: Any = [o.to_json() for o in outcome] if isinstance(outcome, list) else outcome.to_json()
        return cmd.response(body=fastjson.dumps(body))
    return handler


def _body(cmd: RemotingCommand) -> dict[str, Any]:
    if not cmd.body:
        raise AuthDataError("the request has no body")
    raw = fastjson.loads(bytes(cmd.body))
    if not isinstance(raw, dict):
        raise AuthDataError("the body is not a JSON object")
    return raw
