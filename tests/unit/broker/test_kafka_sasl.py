"""The Kafka door's SASL mechanisms in process (`skiff.broker.kafka.sasl`): SCRAM-SHA-256/512
against kafka-python's own SCRAM client (an implementation not written here), which also
checks the server's signature; the ways a SCRAM exchange is refused; PLAIN's token rules.
The connection-level state machine runs against a real broker in
tests/integration/test_kafka_sasl.py."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient

from skiff.broker.auth.model import User, UserStatus
from skiff.broker.auth.service import AuthService
from skiff.broker.config import BrokerConfig
from skiff.broker.kafka.sasl import PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SaslFailure, Scram, exchange
from skiff.common.clock import ManualClock

HOST = "10.1.2.3"


@pytest.fixture
def auth(tmp_path: Path) -> AuthService:
    service = AuthService(BrokerConfig(authentication_enabled=True, authorization_enabled=True), str(tmp_path),
                          ManualClock())
    service.store.create_user(User("app", "app-secret,=1"))
    service.store.create_user(User("off", "off-secret-1", status=UserStatus.DISABLE))
    return service


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_with_kafka_pythons_client(auth: AuthService, mechanism: str) -> None:
    client = ScramClient("app", "app-secret,=1", mechanism)
    server = exchange(auth, mechanism, HOST)
    assert isinstance(server, Scram)
    server_first = server.step(client.first_message())
    assert server.caller is None and b",i=4096" in server_first
    client.process_server_first_message(server_first)
    client.process_server_final_message(server.step(client.final_message()))  # raises on a wrong signature
    assert server.caller is not None and (server.caller.name, server.caller.host) == ("app", HOST)


def test_scram_salts_afresh_each_time(auth: AuthService) -> None:
    salts = set()
    for _ in range(2):
        server = exchange(auth, SCRAM_SHA_256, HOST)
        assert server is not None
        first = dict(p.split("=", 1) for p in server.step(b"n,,n=app,r=abc").decode().split(","))
        assert first["r"].startswith("abc") and len(first["r"]) > 3
        salts.add(base64.b64decode(first["s"]))
    assert len(salts) == 2


@pytest.mark.parametrize("password, final, why", [
    ("wrong-secret", None, "wrong password for User:app"),
    ("app-secret,=1", lambda m: m.replace(b"c=biws", b"c=eSws"), "channel binding"),
    ("app-secret,=1", lambda m: m.replace(b",r=", b",r=x", 1), "nonce is not the server's"),
    ("app-secret,=1", lambda m: m.split(b",p=")[0], "does not parse"),
])
def test_scram_refusals(auth: AuthService, password: str, final: object, why: str) -> None:
    client = ScramClient("app", password, SCRAM_SHA_512)
    server = exchange(auth, SCRAM_SHA_512, HOST)
    assert server is not None
    client.process_server_first_message(server.step(client.first_message()))
    message = client.final_message() if final is None else final(client.final_message())  # type: ignore[operator]
    with pytest.raises(SaslFailure, match=why):
        server.step(message)
    assert server.caller is None
    assert "app-secret" not in why


@pytest.mark.parametrize("first, why", [
    (b"n,,n=nobody,r=abc", "User:nobody is not found"),
    (b"n,,n=off,r=abc", "User:off is disabled"),
    (b"p=tls-unique,,n=app,r=abc", "channel binding is not served"),
    (b"n,,r=abc", "needs n=<user> and r=<nonce>"),
    (b"n,a=root,n=app,r=abc", "authorization id"),
])
def test_scram_first_message_refusals(auth: AuthService, first: bytes, why: str) -> None:
    server = exchange(auth, SCRAM_SHA_256, HOST)
    assert server is not None
    with pytest.raises(SaslFailure, match=why):
        server.step(first)
    assert auth.refused == 1


@pytest.mark.parametrize("token, ok", [
    (b"\0app\0app-secret,=1", True),
    (b"app\0app\0app-secret,=1", True),
    (b"root\0app\0app-secret,=1", False),
    (b"\0app\0app-secret", False),
    (b"\0off\0off-secret-1", False),
    (b"\0app\0app-secret,=1\0", False),
    (b"\0app\0\xff", False),
])
def test_plain_tokens(auth: AuthService, token: bytes, ok: bool) -> None:
    server = exchange(auth, PLAIN, HOST)
    assert server is not None
    if ok:
        assert server.step(token) == b"" and server.caller is not None and server.caller.name == "app"
    else:
        with pytest.raises(SaslFailure):
            server.step(token)
        assert server.caller is None


def test_unknown_mechanism(auth: AuthService) -> None:
    assert exchange(auth, "GSSAPI", HOST) is None
