"""The users and ACLs of one broker, in ``<storePathRootDir>/config/auth.json``, written
atomically (`skiff.broker.persist`) and replicated to slaves with the rest of the metadata.

Readers see one immutable `AuthData` at a time: a change builds the whole next snapshot,
writes it, then swaps the reference, so no check ever runs against a half-applied change
or an empty table (RocketMQ keeps two RocksDBs per broker and nothing replicates them).
A file that does not parse stops the broker at start: it never runs unchecked.

    {"version": 7, "users": [UserInfo...], "acls": [AclInfo...]}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.broker.auth.model import Acl, AuthDataError, PolicyType, Resource, User, parse_subject
from skiff.broker.persist import JsonFile
from skiff.protocol import fastjson

log = logging.getLogger(__name__)

FILE_NAME = "auth.json"


@dataclass(frozen=True, slots=True)
class AuthData:
    users: Mapping[str, User] = field(default_factory=dict)
    acls: Mapping[str, Acl] = field(default_factory=dict)
    """By subject (``User:<name>``)."""
    version: int = 0
    """Grows with every change; a slave copies its master's table when they differ."""

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "users": [u.to_json() for u in self.users.values()],
                "acls": [a.to_json() for a in self.acls.values()]}

    @classmethod
    def from_json(cls, raw: Any, where: str) -> AuthData:
        if not isinstance(raw, Mapping):
            raise AuthDataError(f"{where}: expected an object with users and acls")
        users = [User.from_json(u) for u in raw.get("users") or []]
        acls = [Acl.from_json(a) for a in raw.get("acls") or []]
        return cls({u.username: u for u in users}, {a.subject: a for a in acls}, int(raw.get("version") or 0))


class AuthStore:
    def __init__(self, store_root: str | None) -> None:
        """``store_root`` None: a table kept in memory only (plain ACL's accounts, as the gRPC door
        reads them; their file is plain_acl.yml)."""
        self.file = JsonFile.in_store(store_root, FILE_NAME) if store_root is not None else None
        self.data = AuthData()

    def load(self) -> None:
        """Read the file (none yet: no users); `AuthDataError` or `CorruptionError` say what is wrong."""
        raw = self.file.load() if self.file is not None else None
        if raw is not None and self.file is not None:
            self.data = AuthData.from_json(raw, self.file.path)
        log.info("auth data: %d users, %d ACLs (version %d)", len(self.data.users), len(self.data.acls),
                 self.data.version)

    def adopt(self, data: AuthData) -> None:
        """A slave takes its master's whole table, in one swap."""
        self._commit(data.users, data.acls)

    def _commit(self, users: Mapping[str, User], acls: Mapping[str, Acl], version: int | None = None) -> None:
        data = AuthData(dict(users), dict(acls), self.data.version + 1 if version is None else version)
        if self.file is not None:
            self.file.save(fastjson.dumps(data.to_json()))
        self.data = data

    # -- users --------------------------------------------------------------------

    def user(self, name: str) -> User | None:
        return self.data.users.get(name)

    def create_user(self, user: User) -> None:
        if user.username in self.data.users:
            raise AuthDataError(f"user {user.username!r} already exists")
        self._commit({**self.data.users, user.username: user}, self.data.acls)

    def create_user_if_absent(self, user: User) -> None:
        if user.username not in self.data.users:
            self.create_user(user)

    def update_user(self, name: str, raw: Mapping[str, Any]) -> User:
        old = self.data.users.get(name)
        if old is None:
            raise AuthDataError(f"user {name!r} does not exist")
        new = old.updated(raw)
        self._commit({**self.data.users, name: new}, self.data.acls)
        return new

    def delete_user(self, name: str) -> None:
        """The user and their ACL (RocketMQ deletes both)."""
        if name not in self.data.users:
            raise AuthDataError(f"user {name!r} does not exist")
        users = {k: v for k, v in self.data.users.items() if k != name}
        subject = self.data.users[name].subject
        self._commit(users, {k: v for k, v in self.data.acls.items() if k != subject})

    # -- ACLs ---------------------------------------------------------------------

    def acl(self, subject: str) -> Acl | None:
        return self.data.acls.get(subject)

    def put_acl(self, acl: Acl) -> Acl:
        """Create or update alike: ``acl``'s entries merged into the subject's (per policy type
        and resource); the user must exist."""
        name = acl.username
        if name not in self.data.users:
            raise AuthDataError(f"user {name!r} does not exist: create the user first")
        merged = self.data.acls.get(acl.subject, Acl(acl.subject))
        for policy in acl.policies.values():
            merged = merged.merged(policy)
        self._commit(self.data.users, {**self.data.acls, acl.subject: merged})
        return merged

    def delete_acl(self, subject: str, ptype: PolicyType = PolicyType.CUSTOM,
                   resource: Resource | None = None) -> None:
        """Without ``resource`` the whole ACL; else that entry of ``ptype`` (an emptied ACL goes)."""
        subject = parse_subject(subject)
        old = self.data.acls.get(subject)
        if old is None:
            raise AuthDataError(f"{subject} has no ACL")
        acls = {k: v for k, v in self.data.acls.items() if k != subject}
        if resource is not None:
            kept = old.without(ptype, resource)
            if not kept.empty:
                acls[subject] = kept
        self._commit(self.data.users, acls)
