"""ACL 2.0's users and ACLs (docs/acl.md) as RocketMQ 5.3's admin requests change and read them
(AUTH_CREATE_USER ... AUTH_LIST_ACL, 3001-3010; `skiff user`, `skiff acl`), served whether or
not ACL 2.0 is on, so users can be made first.

The gate of these changes is RocketMQ's rule: only a Super caller (the request's
``AccessKey``) may make a Super user, change a user to or from Super, or delete a Super user;
a request without ``AccessKey`` passes it, as upstream, when authentication is off (when it is
on, `Gate.access` has already refused an unsigned request). Refusals: NO_PERMISSION
``only a Super user may ...`` for that rule, SYSTEM_ERROR with the reason for anything the
store refuses (a user that exists or does not, an ACL of a user not made yet, no ACL to delete).
Outcomes carry the password, as RocketMQ's (a slave copies its master's users through them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.broker.auth.model import Acl, AuthDataError, PolicyType, Resource, User, UserType
from skiff.broker.auth.store import AuthStore
from skiff.broker.operations.refusal import Refusal
from skiff.protocol.codes import ResponseCode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UserChange:
    """An update of a user: only the non-empty fields of ``fields`` (a UserInfo's) are applied."""

    username: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AclDeletion:
    """A subject's whole ACL (``resource`` None), or its entry of one policy type and resource."""

    subject: str
    policy_type: PolicyType = PolicyType.CUSTOM
    resource: Resource | None = None


class AuthAdminOperation:
    def __init__(self, store: AuthStore) -> None:
        self.store = store

    # -- users --------------------------------------------------------------------

    def create_user(self, user: User, caller: str | None) -> Refusal | None:
        """``caller``: the request's AccessKey (None: the request had none)."""
        if user.type is UserType.SUPER and not self._is_super(caller):
            return _not_super(f"create the Super user {user.username!r}")
        refusal = _stored(lambda: self.store.create_user(user))
        if refusal is None:
            log.info("user %s created (%s)", user.username, user.type.title)
        return refusal

    def update_user(self, change: UserChange, caller: str | None) -> User | Refusal:
        old = self.store.user(change.username)
        to_super = str(change.fields.get("userType", "")).lower() == "super"
        if old is not None and (old.type is UserType.SUPER or to_super) and not self._is_super(caller):
            return _not_super(f"change the user {change.username!r} to or from Super")
        try:
            new = self.store.update_user(change.username, change.fields)
        except AuthDataError as exc:
            return Refusal(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("user %s updated", change.username)
        return new

    def delete_user(self, name: str, caller: str | None) -> Refusal | None:
        """The user and their ACL."""
        old = self.store.user(name)
        if old is not None and old.type is UserType.SUPER and not self._is_super(caller):
            return _not_super(f"delete the Super user {name!r}")
        refusal = _stored(lambda: self.store.delete_user(name))
        if refusal is None:
            log.info("user %s deleted", name)
        return refusal

    def user(self, name: str) -> User | Refusal:
        user = self.store.user(name)
        return user if user is not None else Refusal(ResponseCode.SYSTEM_ERROR, f"user {name!r} does not exist")

    def users(self, part: str = "") -> list[User]:
        """The users whose name holds ``part``, by name."""
        return [u for name, u in sorted(self.store.data.users.items()) if part in name]

    # -- ACLs ---------------------------------------------------------------------

    def put_acl(self, acl: Acl) -> Acl | Refusal:
        """Create and update alike: ``acl``'s entries merged into the subject's; the user must exist."""
        try:
            merged = self.store.put_acl(acl)
        except AuthDataError as exc:
            return Refusal(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("ACL of %s set: %d policies", merged.subject, len(merged.policies))
        return merged

    def delete_acl(self, deletion: AclDeletion) -> Refusal | None:
        resource = deletion.resource
        refusal = _stored(lambda: self.store.delete_acl(deletion.subject, deletion.policy_type, resource))
        if refusal is None:
            log.info("ACL of %s: %s deleted", deletion.subject, resource.key if resource else "all")
        return refusal

    def acl(self, subject: str) -> Acl | Refusal:
        acl = self.store.acl(subject)
        return acl if acl is not None else Refusal(ResponseCode.SYSTEM_ERROR, f"{subject} has no ACL")

    def acls(self, subjects: str = "", resources: str = "") -> list[Acl]:
        """The ACLs whose subject holds ``subjects`` and, with ``resources``, that have an entry
        whose resource holds it, by subject."""
        return [acl for subject, acl in sorted(self.store.data.acls.items())
                if subjects in subject and (not resources or any(
                    resources in e.resource.key for p in acl.policies.values() for e in p.entries))]

    def _is_super(self, caller: str | None) -> bool:
        if not caller:
            return True
        user = self.store.user(caller)
        return user is not None and user.type is UserType.SUPER


def _not_super(what: str) -> Refusal:
    return Refusal(ResponseCode.NO_PERMISSION, f"only a Super user may {what}")


def _stored(change: Callable[[], object]) -> Refusal | None:
    """The store's refusal of a change as SYSTEM_ERROR with its reason."""
    try:
        change()
    except AuthDataError as exc:
        return Refusal(ResponseCode.SYSTEM_ERROR, str(exc))
    return None
