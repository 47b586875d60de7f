"""ACL 2.0 evaluation, table-driven: the most specific matching entry decides (RocketMQ 5.3's
AclAuthorizationHandler), Default entries only when no Custom one matches, sourceIps by CIDR,
Super users unchecked."""

from __future__ import annotations

import pytest

from skiff.broker.auth.evaluate import Need, refusal
from skiff.broker.auth.model import Acl, Action, AuthDataError, Decision, Policy, PolicyEntry, PolicyType, Resource, User, \
    UserType

P, S, G, U, C, D = Action.PUB, Action.SUB, Action.GET, Action.UPDATE, Action.CREATE, Action.DELETE


def entry(resource: str, actions: str, decision: str = "Allow", ips: tuple[str, ...] = ()) -> dict:
    return {"resource": resource, "actions": actions.split(","), "decision": decision, "sourceIps": list(ips)}


ACL = Acl.from_json({"subject": "User:app", "policies": [
    {"policyType": "Custom", "entries": [
        entry("Topic:*", "All", "Deny"),
        entry("Topic:orders", "Pub,Sub"),
        entry("Topic:ord*", "Sub"),
        entry("Topic:orde*", "Pub", "Deny"),
        entry("Topic:pay", "Pub", ips=("10.1.0.0/16", "::1")),
        entry("Group:billing", "Sub"),
        entry("Group:bill*", "All", "Deny"),
        entry("Cluster:DefaultCluster", "Get"),
    ]},
    {"policyType": "Default", "entries": [
        entry("*", "Sub"),
        entry("Group:*", "Sub,Get"),
    ]},
]})

CASES = [
    # resource, actions, host, allowed, why
    (Resource.topic("orders"), {P}, "127.0.0.1", True, "literal Allow beats the prefix Deny and Topic:* Deny"),
    (Resource.topic("orders"), {S}, "127.0.0.1", True, "literal beats prefix"),
    (Resource.topic("ordinary"), {S}, "127.0.0.1", True, "prefix Allow beats Topic:* Deny"),
    (Resource.topic("ordered"), {P}, "127.0.0.1", False, "the longer prefix orde* (Deny) decides"),
    (Resource.topic("ordered"), {S}, "127.0.0.1", True, "orde* grants no Sub, so ord* decides"),
    (Resource.topic("other"), {S}, "127.0.0.1", False, "Custom Topic:* Deny matches: Default never consulted"),
    (Resource.topic("pay"), {P}, "10.1.2.3", True, "inside the CIDR"),
    (Resource.topic("pay"), {P}, "::1", True, "an IPv6 address listed"),
    (Resource.topic("pay"), {P}, "10.2.0.1", False, "outside every sourceIp: Topic:* Deny decides"),
    (Resource.topic("pay"), {P}, "not-an-ip", False, "an unparsable host matches no sourceIps"),
    (Resource.group("billing"), {S}, "127.0.0.1", True, "literal Allow beats bill* Deny"),
    (Resource.group("%RETRY%billing"), {S}, "127.0.0.1", True, "a retry topic names its group"),
    (Resource.group("billing"), {U}, "127.0.0.1", False, "Update only matches bill* (Deny)"),
    (Resource.group("bills"), {S}, "127.0.0.1", False, "the prefix Deny"),
    (Resource.group("shop"), {S, G}, "127.0.0.1", True, "no Custom match: Default Group:* Sub/Get"),
    (Resource.group("shop"), {D}, "127.0.0.1", False, "Default grants no Delete"),
    (Resource.cluster("DefaultCluster"), {G}, "127.0.0.1", True, "cluster Get"),
    (Resource.cluster("DefaultCluster"), {U}, "127.0.0.1", False, "no cluster Update anywhere"),
    (Resource.cluster("Other"), {G}, "127.0.0.1", False, "another cluster; Default '*' grants only Sub"),
    (Resource.cluster("Other"), {S}, "127.0.0.1", True, "Default '*' covers every type"),
]


@pytest.mark.parametrize(("resource", "actions", "host", "allowed", "why"), CASES, ids=[c[4] for c in CASES])
def test_most_specific_entry_decides(resource: Resource, actions: set[Action], host: str, allowed: bool,
                                     why: str) -> None:
    user = User("app", "secret-1")
    reason = refusal(user, ACL, [Need(resource, frozenset(actions))], host)
    assert (reason is None) is allowed, (why, reason)
    if reason is not None:
        assert "User:app" in reason and resource.key in reason and host in reason and "secret-1" not in reason


def test_every_need_must_pass_and_a_super_user_passes_unchecked() -> None:
    user = User("app", "secret-1")
    needs = [Need.of(Resource.topic("orders"), P), Need.of(Resource.topic("other"), S)]
    assert "Topic:other" in (refusal(user, ACL, needs, "127.0.0.1") or "")
    assert refusal(User("root", "x", UserType.SUPER), None, needs, "127.0.0.1") is None
    assert "no matching policy" in (refusal(user, None, needs[:1], "127.0.0.1") or "")
    assert refusal(user, None, [], "127.0.0.1") is None


def test_deny_decides_a_full_tie() -> None:
    """Within one policy a resource has one entry; two policies' entries never mix. A tie is built
    here directly, to pin the rule."""
    tied = tuple(PolicyEntry(Resource.parse("Topic:a*"), frozenset({P}), d) for d in (Decision.ALLOW, Decision.DENY))
    acl = Acl("User:t", {PolicyType.CUSTOM: Policy(PolicyType.CUSTOM, tied)})
    assert refusal(User("t", "x"), acl, [Need.of(Resource.topic("ab"), P)], "127.0.0.1") is not None


@pytest.mark.parametrize(("raw", "message"), [
    (entry("Topic:", "Pub"), "is not '*'"),
    (entry("Queue:x", "Pub"), "type"),
    (entry("Topic:a*b", "Pub"), "may only end"),
    (entry("Topic:a", "Any"), "Any is not granted"),
    (entry("Topic:a", "Publish"), "is not one of"),
    (entry("Topic:a", "Pub", "Maybe"), "decision"),
    ({"resource": "Topic:a", "actions": ["Pub"]}, "decision .Allow or Deny. is missing"),
    (entry("Topic:a", "Pub", ips=("10.0.0.300",)), "sourceIps"),
])
def test_bad_entries_are_refused_with_the_field(raw: dict, message: str) -> None:
    with pytest.raises(AuthDataError, match=message):
        PolicyEntry.from_json(raw, "entry")


def test_resources_parse_and_print_back() -> None:
    for key in ("*", "Topic:*", "Topic:ab*", "Topic:ab", "Group:g", "Cluster:c"):
        assert Resource.parse(key).key == key
    assert Resource.parse("topic:x").key == "Topic:x"
    assert Resource.parse("Group:%RETRY%g").key == "Group:g"
