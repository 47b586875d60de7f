"""The users/ACL store (durable, merged per resource, one snapshot at a time), the gRPC signature
with its clock-skew window, and the migration of RocketMQ's sample plain_acl.yml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from skiff.broker.auth.evaluate import Need
from skiff.broker.auth.migrate import migrate_plain_acl
from skiff.broker.auth.model import Acl, Action, AuthDataError, Decision, PolicyType, Resource, User, UserType
from skiff.broker.auth.signature import SignatureError, authorization_header, check_grpc, date_time_now, \
    parse_authorization
from skiff.broker.auth.service import AuthService, Caller
from skiff.broker.auth.store import AuthData, AuthStore
from skiff.broker.config import BrokerConfig
from skiff.common.clock import ManualClock

SAMPLE_PLAIN_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def acl(subject: str, *entries: tuple[str, str, str], ptype: str = "Custom") -> Acl:
    return Acl.from_json({"subject": subject, "policies": [{"policyType": ptype, "entries": [
        {"resource": r, "actions": a.split(","), "decision": d} for r, a, d in entries]}]})


def test_users_and_acls_survive_a_restart_and_merge_per_resource(tmp_path: Path) -> None:
    store = AuthStore(str(tmp_path))
    store.load()
    store.create_user(User("app", "secret-1"))
    with pytest.raises(AuthDataError, match="already exists"):
        store.create_user(User("app", "other"))
    with pytest.raises(AuthDataError, match="does not exist"):
        store.put_acl(acl("User:ghost", ("Topic:a", "Pub", "Allow")))
    store.put_acl(acl("User:app", ("Topic:a", "Pub", "Allow"), ("Topic:b", "Sub", "Allow")))
    store.put_acl(acl("User:app", ("Topic:a", "Pub,Sub", "Deny")))
    store.update_user("app", {"userType": "Super", "password": ""})
    again = AuthStore(str(tmp_path))
    again.load()
    assert again.data == store.data and again.data.version == 4
    user = again.user("app")
    assert user is not None and user.password == "secret-1" and user.type is UserType.SUPER
    entries = {e.resource.key: e for e in again.acl("User:app").policies[PolicyType.CUSTOM].entries}  # type: ignore[union-attr]
    assert set(entries) == {"Topic:a", "Topic:b"}
    assert entries["Topic:a"].decision is Decision.DENY and entries["Topic:a"].actions == {Action.PUB, Action.SUB}
    again.delete_acl("User:app", PolicyType.CUSTOM, Resource.parse("Topic:a"))
    again.delete_acl("User:app", PolicyType.CUSTOM, Resource.parse("Topic:b"))
    assert again.acl("User:app") is None, "an emptied ACL goes"
    again.put_acl(acl("User:app", ("Topic:a", "Pub", "Allow")))
    again.delete_user("app")
    assert again.user("app") is None and again.acl("User:app") is None, "deleting a user deletes their ACL"


def test_a_snapshot_is_replaced_whole(tmp_path: Path) -> None:
    store = AuthStore(str(tmp_path))
    store.create_user(User("a", "pa"))
    before = store.data
    store.create_user(User("b", "pb"))
    assert set(before.users) == {"a"} and set(store.data.users) == {"a", "b"}, "readers keep the old one whole"
    slave = AuthStore(str(tmp_path / "slave"))
    slave.adopt(AuthData.from_json(store.data.to_json(), "master"))
    assert (slave.data.users, slave.data.acls) == (store.data.users, store.data.acls)


def test_a_corrupt_file_stops_the_load(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "auth.json").write_text('{"users": [{"username": "x"}]}')
    with pytest.raises(AuthDataError, match="password is required"):
        AuthStore(str(tmp_path)).load()


def test_grpc_signature_right_wrong_garbled_and_stale() -> None:
    now_s = 1_800_000_000
    date = date_time_now(now_s)
    good = parse_authorization(authorization_header("app", "secret-1", date), date)
    check_grpc(good, "secret-1", now_s * 1000)
    check_grpc(parse_authorization(authorization_header("app", "secret-1", date).upper().replace(
        "CREDENTIAL=APP", "Credential=app").replace("SIGNATURE=", "Signature="), date), "secret-1", now_s * 1000)
    with pytest.raises(SignatureError, match="check signature failed"):
        check_grpc(good, "wrong", now_s * 1000)
    with pytest.raises(SignatureError, match="from the broker's clock"):
        check_grpc(good, "secret-1", (now_s + 301) * 1000)
    with pytest.raises(SignatureError, match="not hexadecimal"):
        parse_authorization("MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature=zz", date)
    with pytest.raises(SignatureError, match="username cannot be null"):
        parse_authorization("MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=00", date)
    with pytest.raises(SignatureError, match="datetime is null"):
        parse_authorization(authorization_header("app", "s", date), "")


def test_rocketmq_sample_plain_acl_migrates() -> None:
    migrated = migrate_plain_acl(yaml.safe_load(SAMPLE_PLAIN_ACL))
    users = {u.username: u for u in migrated.users}
    assert users["RocketMQ"].type is UserType.NORMAL and users["RocketMQ"].password == "12345678"
    assert users["rocketmq2"].type is UserType.SUPER
    (only,) = migrated.acls
    assert only.subject == "User:RocketMQ"
    custom = {e.resource.key: (sorted(a.title for a in e.actions), e.decision.title)
              for e in only.policies[PolicyType.CUSTOM].entries}
    assert custom == {"Topic:topicA": (["All"], "Deny"), "Topic:topicB": (["Pub", "Sub"], "Allow"),
                      "Topic:topicC": (["Sub"], "Allow"), "Group:groupA": (["All"], "Deny"),
                      "Group:groupB": (["Pub", "Sub"], "Allow"), "Group:groupC": (["Sub"], "Allow")}
    default = {e.resource.key: (sorted(a.title for a in e.actions), e.decision.title)
               for e in only.policies[PolicyType.DEFAULT].entries}
    assert default == {"Topic:*": (["All"], "Deny"), "Group:*": (["Sub"], "Allow")}
    assert any("globalWhiteRemoteAddresses" in s for s in migrated.not_migrated)
    assert any("rocketmq2" in s for s in migrated.not_migrated)
    assert not any("12345678" in s for s in migrated.not_migrated)


def test_a_change_is_seen_by_the_next_check(tmp_path: Path) -> None:
    """Decisions are remembered per table: a change (a new table) is decided afresh at once."""
    config = BrokerConfig(authentication_enabled=True, authorization_enabled=True)
    auth = AuthService(config, str(tmp_path), ManualClock())
    auth.store.create_user(User("app", "secret-1"))
    auth.store.put_acl(acl("User:app", ("Topic:a", "Pub", "Allow")))
    caller = Caller(auth.store.user("app"), "127.0.0.1")
    needs = [Need.of(Resource.topic("a"), Action.PUB)]
    assert auth.authorize(caller, needs, 310) is None
    assert auth.authorize(caller, needs, 310) is None
    auth.store.put_acl(acl("User:app", ("Topic:a", "Pub", "Deny")))
    assert "denied by the entry for Topic:a" in (auth.authorize(caller, needs, 310) or "")
