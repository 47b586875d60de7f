"""Plain ACL without a network: address patterns, plain_acl.yml parsing, and the validator's
decisions on signed requests (signature, admin codes, topic and group perms)."""

from __future__ import annotations

import pytest
import yaml

from skiff.broker.acl.addresses import address_matcher
from skiff.broker.acl.plain_config import DENY, PUB, SUB, AclConfigError, parse_plain_acl
from skiff.broker.acl.validator import perm_allows, refusal
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import PopRequestCode, RequestCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.testing.wire import consumer, send_header
from skiff.protocol.bodies.heartbeat import HeartbeatData

ACL = yaml.safe_load("""
globalWhiteRemoteAddresses: ["10.10.*.*"]
accounts:
  - accessKey: app-user
    secretKey: app-secret-1
    whiteRemoteAddress: 192.168.7.{1,2}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Open=PUB|SUB, ReadOnly=SUB, Denied=DENY]
    groupPerms: [BadGroup=DENY]
  - accessKey: admin-user
    secretKey: admin-secret-1
    admin: true
""")
CONFIG = parse_plain_acl(ACL)
HOST = "127.0.0.1"


@pytest.mark.parametrize(("pattern", "host", "hit"), [
    ("*", "1.2.3.4", True), ("*.*.*.*", "::1", True), ("", "1.2.3.4", False), (None, "1.2.3.4", False),
    ("192.168.0.1", "192.168.0.1", True), ("192.168.0.1", "192.168.0.2", False),
    ("192.168.0.1,10.0.0.1", "10.0.0.1", True), ("192.168.1.{1,2}", "192.168.1.2", True),
    ("192.168.1.{1,2}", "192.168.1.3", False), ("192.168.*.*", "192.168.44.5", True),
    ("10.1.1.1-50", "10.1.1.50", True), ("10.1.1.1-50", "10.1.1.51", False), ("::1", "::1", True),
    ("192.168.*.*", "::1", False),
])
def test_address_patterns(pattern: str | None, host: str, hit: bool) -> None:
    assert address_matcher(pattern)(host) is hit


@pytest.mark.parametrize("pattern", ["192.168.1", "1.2.3.300", "10.1.1.9-2", "a.b.c.d", "1.2.3.{4"])
def test_bad_address_patterns_are_errors(pattern: str) -> None:
    with pytest.raises(ValueError, match="address pattern"):
        address_matcher(pattern)


def test_config_keeps_group_perms_under_retry_topics() -> None:
    app = CONFIG.accounts["app-user"]
    assert app.resource_perms == {"Open": PUB | SUB, "ReadOnly": SUB, "Denied": DENY, "%RETRY%BadGroup": DENY}
    assert (app.default_topic_perm, app.default_group_perm, app.admin) == (DENY, SUB, False)
    assert CONFIG.accounts["admin-user"].admin


@pytest.mark.parametrize(("doc", "message"), [
    ({"accounts": [{"accessKey": "a", "secretKey": "s", "defaultTopicPerm": "WRITE"}]}, "defaultTopicPerm"),
    ({"accounts": [{"accessKey": "a"}]}, "needs accessKey and secretKey"),
    ({"accounts": [{"accessKey": "a", "secretKey": "s"}, {"accessKey": "a", "secretKey": "t"}]}, "twice"),
    ({"accounts": [{"accessKey": "a", "secretKey": "s", "topicPerms": ["T"]}]}, "not name=PERM"),
    ({"globalWhiteRemoteAddresses": ["1.2.3"]}, "globalWhiteRemoteAddresses"),
    (["not", "a", "mapping"], "top level"),
])
def test_bad_config_is_refused_without_secrets(doc: object, message: str) -> None:
    with pytest.raises(AclConfigError, match=message) as info:
        parse_plain_acl(doc)
    assert "secretKey: " not in str(info.value) and "'s'" not in str(info.value)


def test_perm_bits_follow_rocketmq() -> None:
    assert perm_allows(PUB, PUB | SUB) and perm_allows(SUB, SUB) and not perm_allows(PUB, SUB)
    assert not perm_allows(SUB, DENY | SUB)


def signed(cmd: RemotingCommand, ak: str = "app-user", sk: str = "app-secret-1") -> RemotingCommand:
    sign_command(cmd, ak, sk)
    return cmd


def send(topic: str, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    return RemotingCommand.request(code, send_header(code, topic, 0, ""), b"payload")


def pull(topic: str, group: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": topic, "consumerGroup": group, "queueId": "0"})


def offset_update(topic: str, group: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                   {"topic": topic, "consumerGroup": group, "queueId": "0", "commitOffset": "5"})


def test_sends_need_pub() -> None:
    assert refusal(CONFIG, HOST, signed(send("Open"))) is None
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        assert "no PUB permission on topic ReadOnly" in refusal(CONFIG, HOST, signed(send("ReadOnly", code)))
    assert "topic Denied" in refusal(CONFIG, HOST, signed(send("Denied")))
    assert "topic Elsewhere" in refusal(CONFIG, HOST, signed(send("Elsewhere")))


def test_pulls_and_offsets_need_sub_on_topic_and_group() -> None:
    assert refusal(CONFIG, HOST, signed(pull("ReadOnly", "G"))) is None
    assert "topic Denied" in refusal(CONFIG, HOST, signed(pull("Denied", "G")))
    assert "group BadGroup" in refusal(CONFIG, HOST, signed(pull("Open", "BadGroup")))
    assert refusal(CONFIG, HOST, signed(offset_update("Open", "G"))) is None
    assert "topic Denied" in refusal(CONFIG, HOST, signed(offset_update("Denied", "G")))
    assert "group BadGroup" in refusal(CONFIG, HOST, signed(offset_update("Open", "BadGroup")))


@pytest.mark.parametrize("code", list(PopRequestCode))
def test_pop_requests_need_sub_on_topic_and_group(code: int) -> None:
    def pop(topic: str, group: str) -> RemotingCommand:
        return RemotingCommand.request(code, {"topic": topic, "consumerGroup": group, "queueId": "-1"})
    assert refusal(CONFIG, HOST, signed(pop("ReadOnly", "G"))) is None
    assert "topic Denied" in refusal(CONFIG, HOST, signed(pop("Denied", "G")))
    assert "group BadGroup" in refusal(CONFIG, HOST, signed(pop("Open", "BadGroup")))


def test_heartbeat_checks_its_groups_and_subscriptions() -> None:
    body = HeartbeatData("c1", (), (consumer("G", "Open"),)).to_json()
    assert refusal(CONFIG, HOST, signed(RemotingCommand.request(RequestCode.HEART_BEAT, None, body))) is None
    body = HeartbeatData("c1", (), (consumer("G", "Denied"),)).to_json()
    assert "topic Denied" in refusal(CONFIG, HOST, signed(RemotingCommand.request(RequestCode.HEART_BEAT, None, body)))


def test_admin_codes_need_an_admin_account() -> None:
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Open"})
    assert "needs an admin account" in refusal(CONFIG, HOST, signed(delete))
    compact = RemotingCommand.request(SkiffRequestCode.COMPACT_TOPIC, {"topic": "Open"})
    assert "needs an admin account" in refusal(CONFIG, HOST, signed(compact))
    delete = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Open"})
    assert refusal(CONFIG, HOST, signed(delete, "admin-user", "admin-secret-1")) is None


def test_unsigned_unknown_wrong_and_tampered_requests_are_refused() -> None:
    assert "no AccessKey" in refusal(CONFIG, HOST, send("Open"))
    assert "no ACL account" in refusal(CONFIG, HOST, signed(send("Open"), "nobody", "x"))
    wrong = refusal(CONFIG, HOST, signed(send("Open"), sk="app-secret-2"))
    assert "signature check failed" in wrong and "secret" not in wrong.replace("app-user", "")
    tampered = signed(send("Open"))
    assert tampered.ext_fields is not None
    tampered.ext_fields["b"] = "Open2"
    assert "signature check failed" in refusal(CONFIG, HOST, tampered)
    body_changed = signed(send("Open"))
    body_changed.body = b"other payload"
    assert "signature check failed" in refusal(CONFIG, HOST, body_changed)


def test_white_addresses_skip_the_checks() -> None:
    assert refusal(CONFIG, "10.10.3.4", send("Denied")) is None
    unsigned_but_named = send("Denied")
    unsigned_but_named.ext_fields = {**(unsigned_but_named.ext_fields or {}), "AccessKey": "app-user"}
    assert refusal(CONFIG, "192.168.7.2", unsigned_but_named) is None
    assert refusal(CONFIG, "192.168.7.3", unsigned_but_named) is not None
