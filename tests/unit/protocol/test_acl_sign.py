"""RocketMQ ACL signatures: the content, a vector computed with Java's HmacSHA1, signing and checking."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from skiff.protocol.acl_sign import (
    ACCESS_KEY,
    SIGNATURE,
    calc_signature,
    sign_command,
    signature_matches,
    signed_text,
)
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand

FIELDS = {"b": "TopicTest", "a": "PG", "AccessKey": "rocketmq2", "c": "TBW102", "d": "4", "queueId": "3"}
BODY = "héllo body".encode()
JAVA_SIGNATURE = "rcZjjbB+G16r8VzCzwwOsobNyJ0="
"""javax.crypto HmacSHA1 with key "12345678" over the TreeMap's values then the body (jshell)."""


def test_signed_text_is_values_in_key_order_without_the_signature() -> None:
    fields = {**FIELDS, SIGNATURE: "old", "_UNIQUE_KEY_QUERY": "true"}
    assert signed_text(fields) == b"rocketmq2PGTopicTestTBW10243"


def test_signature_equals_javas() -> None:
    assert calc_signature("12345678", FIELDS, BODY) == JAVA_SIGNATURE


def test_sign_command_adds_access_key_and_a_checkable_signature() -> None:
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"b": "TopicTest", "a": "PG"}, b"body")
    sign_command(cmd, "rocketmq2", "12345678")
    assert cmd.ext_fields is not None and cmd.ext_fields[ACCESS_KEY] == "rocketmq2"
    assert signature_matches("12345678", cmd.ext_fields, cmd.body)
    assert not signature_matches("12345679", cmd.ext_fields, cmd.body)


def test_signing_twice_gives_the_same_signature() -> None:
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T"})
    sign_command(cmd, "ak", "sk")
    first = dict(cmd.ext_fields or {})
    sign_command(cmd, "ak", "sk")
    assert cmd.ext_fields == first


def test_a_request_without_fields_is_signed_over_its_body() -> None:
    cmd = RemotingCommand.request(RequestCode.HEART_BEAT, None, b"{}")
    sign_command(cmd, "ak", "sk")
    assert signature_matches("sk", cmd.ext_fields, b"{}")
    assert not signature_matches("sk", cmd.ext_fields, b"{ }")


def test_missing_signature_does_not_match() -> None:
    assert not signature_matches("sk", {"AccessKey": "ak"})
    assert not signature_matches("sk", None)


@given(st.dictionaries(st.text(st.characters(min_codepoint=48, max_codepoint=122), min_size=1), st.text()),
       st.binary(), st.sampled_from(["topic", "queueId", "a", "AccessKey"]), st.text(min_size=1))
def test_any_changed_field_or_body_breaks_the_signature(fields: dict[str, str], body: bytes, key: str,
                                                        extra: str) -> None:
    signed = {**fields, ACCESS_KEY: "ak"}
    signed[SIGNATURE] = calc_signature("secret", signed, body)
    assert signature_matches("secret", signed, body)
    tampered = {**signed, key: signed.get(key, "") + extra}
    assert not signature_matches("secret", tampered, body)
    assert not signature_matches("secret", signed, body + b"x")
