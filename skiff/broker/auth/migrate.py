"""RocketMQ 4.x plain_acl.yml accounts as ACL 2.0 users and ACLs (RocketMQ 5.3's AuthMigrator).

| plain ACL                                  | ACL 2.0                                          |
|--------------------------------------------|--------------------------------------------------|
| accessKey / secretKey                      | username / password                              |
| ``admin: true``                            | a Super user, else Normal                        |
| ``topicPerms: [t=P]``, ``groupPerms: [g=P]`` | Custom entries ``Topic:t``, ``Group:g``        |
| ``defaultTopicPerm``, ``defaultGroupPerm`` | Default entries ``Topic:*``, ``Group:*``         |
| P = PUB / SUB / PUB\\|SUB                  | [Pub] / [Sub] / [Pub, Sub], Allow                |
| P = DENY (or missing)                      | [All], Deny                                      |

``whiteRemoteAddress`` and ``globalWhiteRemoteAddresses`` have no ACL 2.0 form (as upstream,
they are not migrated: `migrate` reports them so the operator can write sourceIps policies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skiff.broker.acl.plain_config import DENY, PUB, SUB, PlainAclConfig, parse_plain_acl
from skiff.broker.auth.model import Acl, Action, Decision, Pattern, Policy, PolicyEntry, PolicyType, Resource, \
    ResourceType, User, UserType
from skiff.broker.auth.store import AuthData
from skiff.common.names import RETRY_PREFIX


@dataclass(frozen=True, slots=True)
class Migrated:
    users: tuple[User, ...]
    acls: tuple[Acl, ...]
    not_migrated: tuple[str, ...]
    """What has no ACL 2.0 form, said for the operator (never a secret)."""


def _entry(resource: Resource, perm: int) -> PolicyEntry:
    if perm & DENY:
        return PolicyEntry(resource, frozenset({Action.ALL}), Decision.DENY)
    actions = {a for bit, a in ((PUB, Action.PUB), (SUB, Action.SUB)) if perm & bit}
    return PolicyEntry(resource, frozenset(actions or {Action.ALL}), Decision.ALLOW)


def migrate_plain_acl(data: Any, source: str = "plain_acl.yml") -> Migrated:
    """``data``: the loaded YAML document; `AclConfigError` names what cannot be read."""
    return from_plain_config(parse_plain_acl(data, source), data)


def as_auth_data(migrated: Migrated) -> AuthData:
    """The migrated accounts as one table (what the gRPC door checks under plain ACL)."""
    return AuthData({u.username: u for u in migrated.users}, {a.subject: a for a in migrated.acls})


def from_plain_config(config: PlainAclConfig, data: Any) -> Migrated:
    """``config`` parsed from ``data`` (which alone tells a white address that was written)."""
    users, acls, skipped = [], [], []
    if config.global_white:
        skipped.append("globalWhiteRemoteAddresses (write sourceIps in the users' policies instead)")
    accounts = (data or {}).get("accounts") if isinstance(data, dict) else None
    raw_accounts = {str(a.get("accessKey")): a for a in accounts or [] if isinstance(a, dict)}
    for key, account in config.accounts.items():
        users.append(User(key, account.secret_key, UserType.SUPER if account.admin else UserType.NORMAL))
        if str(raw_accounts.get(key, {}).get("whiteRemoteAddress") or "").strip():
            skipped.append(f"whiteRemoteAddress of {key}")
        if account.admin:
            continue
        custom = [_entry(Resource.group(name[len(RETRY_PREFIX):]) if name.startswith(RETRY_PREFIX)
                         else Resource.topic(name), perm) for name, perm in account.resource_perms.items()]
        default = [_entry(Resource(ResourceType.TOPIC, "", Pattern.ANY), account.default_topic_perm),
                   _entry(Resource(ResourceType.GROUP, "", Pattern.ANY), account.default_group_perm)]
        acl = Acl(f"User:{key}").merged(Policy(PolicyType.DEFAULT, tuple(default)))
        if custom:
            acl = acl.merged(Policy(PolicyType.CUSTOM, tuple(custom)))
        acls.append(acl)
    return Migrated(tuple(users), tuple(acls), tuple(skipped))
