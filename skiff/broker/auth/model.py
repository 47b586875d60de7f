"""ACL 2.0's data, as RocketMQ 5.3 models it (RIP-68): users, and per user an ACL of policies
whose entries grant or deny actions on resources from source addresses.

| value        | wire form (RocketMQ's UserInfo / AclInfo JSON)                          |
|--------------|--------------------------------------------------------------------------|
| `User`       | ``{"username", "password", "userType": "Super"/"Normal", "userStatus": "enable"/"disable"}`` |
| `Acl`        | ``{"subject": "User:x", "policies": [Policy...]}``: at most one policy per type |
| `Policy`     | ``{"policyType": "Custom"/"Default", "entries": [PolicyEntry...]}``       |
| `PolicyEntry`| ``{"resource": "Topic:a*", "actions": ["Pub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}`` |

Resources: ``*`` (any type, any name), ``Topic:*`` / ``Group:*`` / ``Cluster:*`` (any name of
that type), ``Topic:ab*`` (names starting ``ab``), ``Topic:ab`` (that name). A group named by its
retry topic (``%RETRY%g``) is the group ``g``. Enum names are read case-insensitively, as
RocketMQ's ``getByName``. Malformed data is an `AuthDataError` naming the field, never a password.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skiff.common.errors import ConfigError
from skiff.common.names import RETRY_PREFIX

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
USER_PREFIX = "User:"


class AuthDataError(ConfigError):
    """A user, ACL or resource that cannot be used; the message says which field and why."""


class _Named(enum.Enum):
    """An enum whose JSON form is its RocketMQ name, read back case-insensitively."""

    __hash__ = object.__hash__
    """Members are singletons compared by identity; Enum's own hash is Python code, and every
    check hashes resources and actions (the decision cache's keys)."""

    @property
    def title(self) -> str:
        return str(self.value)

    @classmethod
    def parse(cls, text: Any, what: str) -> Any:
        wanted = str(text or "").strip().lower()
        for member in cls:
            if member.title.lower() == wanted:
                return member
        names = ", ".join(m.title for m in cls)
        raise AuthDataError(f"{what} {text!r} is not one of {names}")


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    """Only in a request: any one of its actions suffices. Never granted by an entry."""
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class Pattern(enum.IntEnum):
    """How an entry's name matches, in order of specificity (a higher value decides first)."""

    ANY = 0
    PREFIXED = 1
    LITERAL = 2

    __hash__ = int.__hash__


@dataclass(frozen=True, slots=True)
class Resource:
    type: ResourceType
    name: str = ""
    pattern: Pattern = Pattern.LITERAL

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        """A consumer group; its retry topic names the same group, as RocketMQ's ``ofGroup``."""
        return cls(ResourceType.GROUP, name[len(RETRY_PREFIX):] if name.startswith(RETRY_PREFIX) else name)

    @classmethod
    def cluster(cls, name: str) -> Resource:
        return cls(ResourceType.CLUSTER, name)

    @classmethod
    def parse(cls, key: Any) -> Resource:
        text = str(key or "").strip()
        if text == "*":
            return cls(ResourceType.ANY, "", Pattern.ANY)
        kind, sep, name = text.partition(":")
        if not sep or not name:
            raise AuthDataError(f"resource {text!r} is not '*', Type:name, Type:prefix* or Type:*")
        rtype = ResourceType.parse(kind, f"resource {text!r}: type")
        if rtype is ResourceType.ANY:
            raise AuthDataError(f"resource {text!r}: write '*' for any resource")
        if name == "*":
            return cls(rtype, "", Pattern.ANY)
        if name.endswith("*"):
            if "*" in name[:-1]:
                raise AuthDataError(f"resource {text!r}: '*' may only end a prefix")
            return cls(rtype, name[:-1], Pattern.PREFIXED)
        if "*" in name:
            raise AuthDataError(f"resource {text!r}: '*' may only end a prefix")
        return cls.group(name) if rtype is ResourceType.GROUP else cls(rtype, name)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        suffix = {Pattern.ANY: "*", Pattern.PREFIXED: f"{self.name}*", Pattern.LITERAL: self.name}[self.pattern]
        return f"{self.type.title}:{suffix}"

    def matches(self, wanted: Resource) -> bool:
        """Whether this (an entry's) resource covers ``wanted`` (a request's, always literal)."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is Pattern.ANY:
            return True
        if self.pattern is Pattern.PREFIXED:
            return wanted.name.startswith(self.name)
        return wanted.name == self.name


def parse_ip(text: Any) -> Network:
    try:
        return ipaddress.ip_network(str(text).strip(), strict=False)
    except ValueError:
        raise AuthDataError(f"sourceIps: {text!r} is not an IP address or CIDR") from None


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: Resource
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[Network, ...] = ()
    """Empty: any address."""

    def grants(self, wanted: Iterable[Action]) -> bool:
        """Whether this entry speaks for any of ``wanted`` (RocketMQ's ``isMatchAction``)."""
        return Action.ALL in self.actions or any(a in self.actions for a in wanted) or Action.ANY in wanted

    def admits(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        if not self.source_ips:
            return True
        return ip is not None and any(ip.version == net.version and ip in net for net in self.source_ips)

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.resource.key, "actions": sorted(a.title for a in self.actions),
                "sourceIps": [str(n) for n in self.source_ips], "decision": self.decision.title}

    @classmethod
    def from_json(cls, raw: Any, where: str) -> PolicyEntry:
        if not isinstance(raw, Mapping):
            raise AuthDataError(f"{where}: an entry must be an object")
        resource = Resource.parse(raw.get("resource"))
        where = f"{where} ({resource.key})"
        actions = frozenset(Action.parse(a, f"{where}: action") for a in _list(raw.get("actions"), where))
        if not actions or Action.ANY in actions:
            raise AuthDataError(f"{where}: actions must name at least one of All, Pub, Sub, Create, Update, "
                                f"Delete, Get, List (Any is not granted)")
        if raw.get("decision") in (None, ""):
            raise AuthDataError(f"{where}: decision (Allow or Deny) is missing")
        decision = Decision.parse(raw.get("decision"), f"{where}: decision")
        ips = tuple(parse_ip(ip) for ip in _list(raw.get("sourceIps"), where) if str(ip).strip())
        return cls(resource, actions, decision, ips)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise AuthDataError(f"{where}: expected a list, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class Policy:
    type: PolicyType
    entries: tuple[PolicyEntry, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"policyType": self.type.title, "entries": [e.to_json() for e in self.entries]}

    @classmethod
    def from_json(cls, raw: Any, where: str) -> Policy:
        if not isinstance(raw, Mapping):
            raise AuthDataError(f"{where}: a policy must be an object")
        ptype = PolicyType.parse(raw.get("policyType") or "Custom", f"{where}: policyType")
        entries = [PolicyEntry.from_json(e, f"{where} entry {i}") for i, e in enumerate(_list(raw.get("entries"), where))]
        return cls(ptype, tuple(_one_per_resource(entries)))

    def merged(self, entries: Iterable[PolicyEntry]) -> Policy:
        """This policy with ``entries`` replacing those of the same resource (RocketMQ's update)."""
        return replace(self, entries=tuple(_one_per_resource([*self.entries, *entries])))

    def without(self, resource: Resource) -> Policy:
        return replace(self, entries=tuple(e for e in self.entries if e.resource != resource))


def _one_per_resource(entries: Sequence[PolicyEntry]) -> list[PolicyEntry]:
    """The last entry of each resource wins, in first-seen order."""
    by_resource: dict[Resource, PolicyEntry] = {}
    for entry in entries:
        by_resource[entry.resource] = entry
    return list(by_resource.values())


@dataclass(frozen=True, slots=True)
class Acl:
    subject: str
    """``User:<name>``."""
    policies: Mapping[PolicyType, Policy] = field(default_factory=dict)

    @property
    def username(self) -> str:
        return self.subject[len(USER_PREFIX):]

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "policies": [self.policies[t].to_json() for t in PolicyType
                                                       if t in self.policies]}

    @classmethod
    def from_json(cls, raw: Any, subject: str | None = None) -> Acl:
        if not isinstance(raw, Mapping):
            raise AuthDataError("an ACL must be an object with subject and policies")
        subject = parse_subject(subject or raw.get("subject"))
        acl = cls(subject)
        for i, p in enumerate(_list(raw.get("policies"), f"{subject} policies")):
            acl = acl.merged(Policy.from_json(p, f"{subject} policy {i}"))
        return acl

    def merged(self, policy: Policy) -> Acl:
        """This ACL with ``policy``'s entries merged into its policy of that type (create and
        update behave alike, as RocketMQ 5.3's)."""
        mine = self.policies.get(policy.type, Policy(policy.type))
        return replace(self, policies={**self.policies, policy.type: mine.merged(policy.entries)})

    def without(self, ptype: PolicyType, resource: Resource) -> Acl:
        mine = self.policies.get(ptype)
        if mine is None:
            return self
        kept = mine.without(resource)
        rest = {t: p for t, p in self.policies.items() if t is not ptype}
        return replace(self, policies={**rest, ptype: kept} if kept.entries else rest)

    @property
    def empty(self) -> bool:
        return not any(p.entries for p in self.policies.values())


def parse_subject(text: Any) -> str:
    value = str(text or "").strip()
    if not value.startswith(USER_PREFIX) or len(value) == len(USER_PREFIX):
        raise AuthDataError(f"subject {value!r} is not User:<name>")
    return value


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)
    type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @property
    def subject(self) -> str:
        return USER_PREFIX + self.username

    def to_json(self, with_password: bool = True) -> dict[str, Any]:
        data = {"username": self.username, "userType": self.type.title, "userStatus": self.status.title}
        return {**data, "password": self.password} if with_password else data

    @classmethod
    def from_json(cls, raw: Any, username: str | None = None) -> User:
        if not isinstance(raw, Mapping):
            raise AuthDataError("a user must be an object with username and password")
        name = str(username or raw.get("username") or "").strip()
        if not name or ":" in name or "," in name:
            raise AuthDataError(f"username {name!r} is empty or holds ':' or ','")
        password = str(raw.get("password") or "")
        if not password:
            raise AuthDataError(f"user {name!r}: a password is required")
        return cls(name, password, UserType.parse(raw.get("userType") or "Normal", f"user {name!r}: userType"),
                   UserStatus.parse(raw.get("userStatus") or "enable", f"user {name!r}: userStatus"))

    def updated(self, raw: Mapping[str, Any]) -> User:
        """Only the non-empty fields of ``raw`` applied (RocketMQ's update user)."""
        return User(self.username, str(raw.get("password") or self.password),
                    UserType.parse(raw["userType"], "userType") if raw.get("userType") else self.type,
                    UserStatus.parse(raw["userStatus"], "userStatus") if raw.get("userStatus") else self.status)
