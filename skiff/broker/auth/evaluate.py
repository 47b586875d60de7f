"""Authorization as RocketMQ 5.3's ``AclAuthorizationHandler`` decides it: the most specific
matching entry decides, not "any deny wins".

For each thing a request needs (a resource and the actions any one of which suffices):

1. a Super user passes without any ACL;
2. the user's Custom entries that match on all three counts — the resource, at least one
   of the actions (``All`` grants every action), the source address (an empty ``sourceIps``
   admits any) — are collected; only when none match are the Default entries tried the same way;
3. none match: refused ("no matching policy"); else the entries are ordered by specificity
   and the first decides:
   a concrete type beats ``*``; then a literal name beats a prefix, a prefix beats ``Type:*``;
   a longer prefix beats a shorter one; on a full tie Deny decides (the intent upstream's
   comment states; its comparator sorts Allow first, but within one policy a full tie cannot
   arise: each resource has one entry).

So ``Topic:orders`` Allow wins over ``Topic:*`` Deny, and a Default ``Topic:*`` Allow is not
consulted once any Custom entry matches. A request needing several things passes only if
each passes; a request needing nothing passes on authentication alone.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from skiff.common.limits import AUTH_ADDRESSES_CACHED
from skiff.broker.auth.model import Acl, Action, Decision, Pattern, PolicyEntry, PolicyType, Resource, ResourceType, \
    User, UserType

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Need:
    """What a request touches and the actions of which any one suffices."""

    resource: Resource
    actions: frozenset[Action]
    key: str = field(init=False, compare=False, repr=False)
    """``describe()``, made once: what the decision cache is keyed by (strings hash once)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.describe())

    @classmethod
    def of(cls, resource: Resource, *actions: Action) -> Need:
        return cls(resource, frozenset(actions))

    def describe(self) -> str:
        return f"{'/'.join(sorted(a.title for a in self.actions))} on {self.resource.key}"


def _rank(entry: PolicyEntry) -> tuple[int, int, int, int]:
    """Larger is more specific; sorted descending, the first entry decides."""
    r = entry.resource
    return (r.type is not ResourceType.ANY, int(r.pattern) if r.type is not ResourceType.ANY else -1,
            len(r.name) if r.pattern is Pattern.PREFIXED else 0, entry.decision is Decision.DENY)


def deciding_entry(acl: Acl, need: Need, ip: Address | None) -> PolicyEntry | None:
    for ptype in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policies.get(ptype)
        if policy is None:
            continue
        matched = [e for e in policy.entries
                   if e.resource.matches(need.resource) and e.grants(need.actions) and e.admits(ip)]
        if matched:
            return max(matched, key=_rank)
    return None


@functools.lru_cache(maxsize=AUTH_ADDRESSES_CACHED)
def parse_address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def refusal(user: User, acl: Acl | None, needs: Iterable[Need], host: str) -> str | None:
    """None when ``user`` from ``host`` may do all of ``needs``, else why not (names the user,
    the resource and the address; never a secret)."""
    if user.type is UserType.SUPER:
        return None
    needs = list(needs)
    if not needs:
        return None
    ip = parse_address(host)
    for need in needs:
        entry = None if acl is None else deciding_entry(acl, need, ip)
        if entry is None:
            return f"{user.subject} has no permission for {need.describe()} from {host}: no matching policy"
        if entry.decision is Decision.DENY:
            return (f"{user.subject} has no permission for {need.describe()} from {host}: "
                    f"denied by the entry for {entry.resource.key}")
    return None


def needs_summary(needs: Sequence[Need]) -> str:
    return ", ".join(n.describe() for n in needs) or "nothing"
