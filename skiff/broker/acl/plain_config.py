"""plain_acl.yml: RocketMQ 4.x plain ACL accounts, parsed into immutable values.

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:            # requests from here skip signature and perms
        admin: false
        defaultTopicPerm: DENY         # DENY | PUB | SUB | PUB|SUB (SUB|PUB)
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Group permissions are kept under the group's retry topic (``%RETRY%group``), as
RocketMQ does, so one table answers both. Unlike RocketMQ, a perm word it does
not know is an error (RocketMQ reads it as DENY), and so is an account without
keys or a duplicated access key: `AclConfigError` names the place, never a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.broker.acl.addresses import Matcher, address_matcher
from skiff.common.errors import ConfigError
from skiff.common.names import retry_topic

DENY, ANY, PUB, SUB = 1, 2, 4, 8
"""RocketMQ's Permission bits."""
_PERM_WORDS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}
PERM_NAMES = {DENY: "DENY", PUB: "PUB", SUB: "SUB", ANY: "PUB or SUB", PUB | SUB: "PUB|SUB"}


class AclConfigError(ConfigError):
    """plain_acl.yml cannot be used; the message says where."""


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    resource_perms: Mapping[str, int] = field(default_factory=dict)
    """Topic name, or a group's retry topic, to perm bits."""
    white: Matcher = field(default=lambda _host: False, repr=False)


@dataclass(frozen=True, slots=True)
class PlainAclConfig:
    global_white: tuple[Matcher, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)


def parse_perm(text: Any, where: str) -> int:
    word = str(text).strip().replace(" ", "") if text is not None else "DENY"
    if word not in _PERM_WORDS:
        raise AclConfigError(f"{where}: {text!r} is not DENY, PUB, SUB or PUB|SUB")
    return _PERM_WORDS[word]


def parse_plain_acl(data: Any, source: str = "plain_acl.yml") -> PlainAclConfig:
    """The config of a loaded YAML document; `AclConfigError` says what is wrong and where."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise AclConfigError(f"{source}: the top level must be a mapping with accounts")
    whites = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(whites, list):
        raise AclConfigError(f"{source}: globalWhiteRemoteAddresses must be a list")
    global_white = tuple(_matcher(w, f"{source}: globalWhiteRemoteAddresses") for w in whites if str(w).strip())
    accounts: dict[str, Account] = {}
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclConfigError(f"{source}: accounts must be a list")
    for i, raw in enumerate(raw_accounts):
        account = _account(raw, f"{source}: accounts[{i}]")
        if account.access_key in accounts:
            raise AclConfigError(f"{source}: accounts[{i}]: accessKey {account.access_key!r} appears twice")
        accounts[account.access_key] = account
    return PlainAclConfig(global_white, accounts)


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, Mapping):
        raise AclConfigError(f"{where}: an account must be a mapping")
    access_key, secret_key = str(raw.get("accessKey") or ""), str(raw.get("secretKey") or "")
    if not access_key or not secret_key:
        raise AclConfigError(f"{where}: an account needs accessKey and secretKey")
    where = f"{where} ({access_key})"
    perms: dict[str, int] = {}
    for key, to_resource in (("topicPerms", str), ("groupPerms", retry_topic)):
        items = raw.get(key) or []
        if not isinstance(items, list):
            raise AclConfigError(f"{where}: {key} must be a list of name=PERM")
        for item in items:
            name, sep, perm = str(item).partition("=")
            if not sep or not name.strip():
                raise AclConfigError(f"{where}: {key} entry {item!r} is not name=PERM")
            perms[to_resource(name.strip())] = parse_perm(perm, f"{where}: {key} {name.strip()}")
    return Account(
        access_key, secret_key, _bool(raw.get("admin", False), f"{where}: admin"),
        parse_perm(raw.get("defaultTopicPerm", "DENY"), f"{where}: defaultTopicPerm"),
        parse_perm(raw.get("defaultGroupPerm", "DENY"), f"{where}: defaultGroupPerm"),
        perms, _matcher(raw.get("whiteRemoteAddress"), f"{where}: whiteRemoteAddress"))


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise AclConfigError(f"{where}: {value!r} is not true or false")


def _matcher(pattern: Any, where: str) -> Matcher:
    try:
        return address_matcher(None if pattern is None else str(pattern))
    except ValueError as exc:
        raise AclConfigError(f"{where}: {exc}") from None
