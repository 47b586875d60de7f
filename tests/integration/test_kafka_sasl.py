"""The Kafka listener under ACL 2.0: SASL against Skiff's users, every request through the gate.

One broker with authentication and authorization on and a Kafka listener. Its users, made
by the Super user over remoting: ``writer`` may Pub and Sub the topic and Sub the group,
``reader`` only Sub them, ``loner`` Pub and Sub the topic but nothing of the group.

- on the wire: the SASL state machine as Kafka's broker runs it (no request but ApiVersions
  before authentication, an unknown mechanism, SaslAuthenticate before the handshake, a wrong
  password: each answered with its code and the connection closed; PLAIN over v1 and v0
  handshakes; no re-authentication);
- confluent-kafka, kafka-python and aiokafka with SASL_PLAINTEXT (and SASL_SSL: the broker's
  port is tls.server.mode=permissive): PLAIN and SCRAM-SHA-256/512 with the right password
  produce and consume; a wrong password is an authentication error, at once; Produce without
  Pub is TOPIC_AUTHORIZATION_FAILED; a group without Sub is GROUP_AUTHORIZATION_FAILED;
  Metadata leaves out the topics a user may not see;
- a broker under plain ACL takes plain_acl.yml's accounts as the SASL users.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from skiff.client import AsyncAdmin, Credentials
from skiff.client._impl.config import ClientConfig
from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.loop import run_coroutine
from tests.integration.test_kafka_wire import Wire, batch, fetch_body, produce_body

pytestmark = pytest.mark.xdist_group("kafka-sasl")  # one worker, one broker for the module

ROOT = Credentials("root", "root-secret-1")
TOPIC, HIDDEN, GROUP = "KSasl", "KSaslHidden", "ksasl-group"
USERS = {"writer": "writer-secret-1", "reader": "reader-secret-1", "loner": "loner-secret-1", "far": "far-secret-1"}
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> CertificatePair:
    return write_self_signed(tmp_path_factory.mktemp("kafka-sasl-certs"), "server")


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory, cert: CertificatePair) -> Iterator[tuple[Cluster, str]]:
    """The cluster and its broker's Kafka address, in tls.server.mode=permissive: SASL_PLAINTEXT
    and SASL_SSL on one port."""
    port = free_port()
    args = [f"--kafkaListenPort={port}", "--authenticationEnabled=true", "--authorizationEnabled=true",
            '--initAuthenticationUser={"username":"root","password":"root-secret-1"}',
            "--tls.server.mode=permissive", f"--tls.server.certPath={cert.cert_path}",
            f"--tls.server.keyPath={cert.key_path}"]
    with Cluster(tmp_path_factory.mktemp("kafka-sasl"), broker_args=args) as c:
        run_coroutine(prepare(c))
        yield c, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def kafka(sasl_cluster: tuple[Cluster, str]) -> str:
    return sasl_cluster[1]


async def prepare(c: Cluster) -> None:
    config = ClientConfig(c.namesrv_addr, instance_name="ksasl-admin", client_ip="127.0.0.1", credentials=ROOT)
    async with AsyncAdmin(client_config=config) as admin:
        for topic in (TOPIC, HIDDEN):
            await admin.create_topic(topic, queue_nums=1)
        for name, secret in USERS.items():
            await admin.create_user(name, secret)
        await admin.set_acl("User:writer", [f"Topic:{TOPIC}", f"Group:{GROUP}"], ["Pub", "Sub"], "Allow", create=True)
        await admin.set_acl("User:reader", [f"Topic:{TOPIC}", f"Group:{GROUP}"], ["Sub"], "Allow", create=True)
        await admin.set_acl("User:loner", [f"Topic:{TOPIC}"], ["Pub", "Sub"], "Allow", create=True)
        await admin.set_acl("User:far", [f"Topic:{TOPIC}"], ["Pub", "Sub"], "Allow", source_ips=["10.0.0.0/8"],
                            create=True)


# -- the wire ----------------------------------------------------------------------------

def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def handshake(wire: Wire, mechanism: str = "PLAIN", version: int = 1) -> dict[str, Any]:
    return wire.call(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def authenticate(wire: Wire, token: bytes) -> dict[str, Any]:
    return wire.call(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})


def closed(wire: Wire) -> bool:
    """Whether the broker closed the connection (EOF within the deadline, nothing more sent)."""
    wire.sock.settimeout(DEADLINE_S)
    try:
        return wire.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def logged_in(bootstrap: str, user: str) -> Wire:
    wire = Wire(bootstrap)
    assert handshake(wire)["error_code"] == 0
    answer = authenticate(wire, plain(user, USERS[user]))
    assert (answer["error_code"], answer["session_lifetime_ms"]) == (0, 0)
    return wire


def test_only_api_versions_and_sasl_before_authentication(kafka: str) -> None:
    wire = Wire(kafka)
    try:
        versions = wire.call(ApiKey.API_VERSIONS, 0, {})
        ranges = {v["api_key"]: (v["min_version"], v["max_version"]) for v in versions["api_keys"]}
        assert ranges[ApiKey.SASL_HANDSHAKE] == (0, 1) and ranges[ApiKey.SASL_AUTHENTICATE] == (0, 2)
        wire.send(ApiKey.METADATA, 5, {"topics": None, "allow_auto_topic_creation": False})
        assert closed(wire)  # as Kafka's broker: no answer, the connection closed
    finally:
        wire.close()


def test_unknown_mechanism_is_refused_and_closed(kafka: str) -> None:
    wire = Wire(kafka)
    try:
        answer = handshake(wire, "GSSAPI")
        assert answer == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                          "mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]}
        assert closed(wire)
    finally:
        wire.close()


def test_authenticate_before_handshake_is_an_illegal_state(kafka: str) -> None:
    wire = Wire(kafka)
    try:
        assert authenticate(wire, plain("writer", USERS["writer"]))["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert closed(wire)
    finally:
        wire.close()


@pytest.mark.parametrize("token, why", [
    (plain("writer", "wrong-secret"), "wrong password for User:writer"),
    (plain("nobody", "whatever-1"), "User:nobody is not found"),
    (plain("writer", USERS["writer"], authzid="root"), "neither empty nor the username"),
    (b"no-nul-here", "authzid NUL username NUL password"),
])
def test_a_failed_plain_is_answered_then_closed(kafka: str, token: bytes, why: str) -> None:
    wire = Wire(kafka)
    try:
        assert handshake(wire)["error_code"] == 0
        answer = authenticate(wire, token)
        assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert why in answer["error_message"] and "writer-secret-1" not in answer["error_message"]
        assert closed(wire)
    finally:
        wire.close()


def test_plain_then_requests_through_the_gate(kafka: str) -> None:
    wire = logged_in(kafka, "reader")
    try:
        # kafka-python's authzid (the username itself) is accepted too, on another connection
        other = Wire(kafka)
        assert handshake(other)["error_code"] == 0
        assert authenticate(other, plain("writer", USERS["writer"], authzid="writer"))["error_code"] == 0
        other.close()
        # no re-authentication: answered ILLEGAL_SASL_STATE, the connection stays
        assert handshake(wire)["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        produced = wire.call(ApiKey.PRODUCE, 7, produce_body(TOPIC, batch(b"refused")))
        part = produced["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["base_offset"]) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
        fetched = wire.call(ApiKey.FETCH, 11, fetch_body(HIDDEN, 0, max_wait_ms=10_000))
        part = fetched["responses"][0]["partitions"][0]
        assert (part["error_code"], part["records"]) == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")
        everything = wire.call(ApiKey.METADATA, 5, {"topics": None, "allow_auto_topic_creation": False})
        assert [t["name"] for t in everything["topics"]] == [TOPIC]  # the hidden topic is left out
        named = wire.call(ApiKey.METADATA, 5, {"topics": [{"name": HIDDEN}, {"name": TOPIC}],
                                                "allow_auto_topic_creation": True})
        assert {t["name"]: t["error_code"] for t in named["topics"]} == {
            TOPIC: 0, HIDDEN: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        joined = wire.call(ApiKey.FIND_COORDINATOR, 1, {"key": "someone-elses-group", "key_type": 0})
        assert joined["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        created = wire.call(ApiKey.CREATE_TOPICS, 4, {"topics": [{"name": "KSaslNew", "num_partitions": 1,
                                                                  "replication_factor": 1}], "timeout_ms": 5000})
        assert created["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        wire.close()


def test_metadata_hides_topics_without_a_warning_per_request(sasl_cluster: tuple[Cluster, str]) -> None:
    """Clients ask for Metadata every few seconds: the topics it hides (and names as refused)
    are its answer, logged at debug level, while other refusals are still warnings."""
    cluster, bootstrap = sasl_cluster
    wire = logged_in(bootstrap, "reader")
    try:
        for _ in range(3):
            everything = wire.call(ApiKey.METADATA, 5, {"topics": None, "allow_auto_topic_creation": False})
            assert HIDDEN not in [t["name"] for t in everything["topics"]]
            named = wire.call(ApiKey.METADATA, 5, {"topics": [{"name": HIDDEN}], "allow_auto_topic_creation": True})
            assert named["topics"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        produced = wire.call(ApiKey.PRODUCE, 7, produce_body(TOPIC, batch(b"refused")))
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        wire.close()
    broker = cluster.broker(0)
    broker.wait_for_line(r"WARNING .*authorization refused request Kafka PRODUCE .*\(user reader\)", DEADLINE_S)
    assert "refused request Kafka METADATA" not in broker.output


def test_the_source_address_is_the_connections(kafka: str) -> None:
    """``far`` may publish only from 10.0.0.0/8; this connection comes from 127.0.0.1."""
    wire = logged_in(kafka, "far")
    try:
        produced = wire.call(ApiKey.PRODUCE, 7, produce_body(TOPIC, batch(b"from afar")))
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == \
            ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        wire.close()


def test_group_and_cluster_refusals_on_the_wire(kafka: str) -> None:
    wire = logged_in(kafka, "loner")  # Pub and Sub on the topic, nothing on any group
    try:
        joined = wire.call(ApiKey.JOIN_GROUP, 5, {
            "group_id": GROUP, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        assert (joined["error_code"], joined["generation_id"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, -1)
        committed = wire.call(ApiKey.OFFSET_COMMIT, 3, {
            "group_id": GROUP, "generation_id": -1, "member_id": "", "retention_time_ms": -1,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                       "committed_metadata": None}]}]})
        assert committed["topics"][0]["partitions"] == [
            {"partition_index": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}]
        fetched = wire.call(ApiKey.OFFSET_FETCH, 3, {"group_id": GROUP, "topics": None})
        assert (fetched["error_code"], fetched["topics"]) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
        described = wire.call(ApiKey.DESCRIBE_GROUPS, 2, {"groups": [GROUP]})
        assert described["groups"][0]["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        configs = wire.call(ApiKey.DESCRIBE_CONFIGS, 2, {"resources": [
            {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
            {"resource_type": 2, "resource_name": HIDDEN, "configuration_keys": None}], "include_synonyms": False})
        assert {r["resource_type"]: r["error_code"] for r in configs["results"]} == {
            4: ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 2: ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    finally:
        wire.close()


def test_plain_over_a_v0_handshake_sends_bare_tokens(kafka: str) -> None:
    wire = Wire(kafka)
    try:
        assert handshake(wire, version=0)["error_code"] == 0
        token = plain("writer", USERS["writer"])
        wire.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert wire.read_frame().remaining == 0  # the empty server token
        listed = wire.call(ApiKey.METADATA, 5, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
        assert listed["topics"][0]["error_code"] == 0
    finally:
        wire.close()


# -- real clients ------------------------------------------------------------------------

def confluent_config(bootstrap: str, user: str, password: str, mechanism: str = "PLAIN",
                     ca: CertificatePair | None = None) -> dict[str, Any]:
    """SASL_PLAINTEXT, or SASL_SSL trusting ``ca`` (the host name checked, librdkafka's default)."""
    tls = {} if ca is None else {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca.cert_path)}
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password, **tls}


def confluent_produce(bootstrap: str, user: str, values: list[bytes], mechanism: str = "PLAIN",
                      ca: CertificatePair | None = None) -> list[Any]:
    """Each message's delivery error (None when stored)."""
    producer = Producer(confluent_config(bootstrap, user, USERS[user], mechanism, ca) | {"message.timeout.ms": 20_000})
    errors: list[Any] = []
    for v in values:
        producer.produce(TOPIC, v, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(DEADLINE_S) == 0
    return errors


@pytest.mark.parametrize("mechanism, tls", [("PLAIN", False), ("SCRAM-SHA-256", False), ("SCRAM-SHA-512", False),
                                             ("PLAIN", True), ("SCRAM-SHA-512", True)])
def test_confluent_produces_and_consumes_with_the_right_password(kafka: str, cert: CertificatePair, mechanism: str,
                                                                 tls: bool) -> None:
    ca = cert if tls else None
    values = [f"{mechanism} {tls} {i}".encode() for i in range(5)]
    assert confluent_produce(kafka, "writer", values, mechanism, ca) == [None] * 5
    consumer = Consumer(confluent_config(kafka, "writer", USERS["writer"], mechanism, ca) | {
        "group.id": GROUP, "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not set(values) <= set(got) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, len(got))], asynchronous=False)
    finally:
        consumer.close()
    assert [v for v in got if v in values] == values


def test_confluent_wrong_password_is_an_authentication_error(kafka: str) -> None:
    errors: list[KafkaError] = []
    producer = Producer(confluent_config(kafka, "writer", "wrong-secret") | {"error_cb": errors.append})
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "wrong password for User:writer" in errors[0].str()


def test_confluent_produce_without_pub_is_topic_authorization_failed(kafka: str) -> None:
    errors = confluent_produce(kafka, "reader", [b"not allowed"])
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_confluent_group_without_sub_is_group_authorization_failed(kafka: str) -> None:
    consumer = Consumer(confluent_config(kafka, "loner", USERS["loner"]) | {
        "group.id": GROUP, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200})
    consumer.subscribe([TOPIC])
    error = None
    deadline = time.monotonic() + DEADLINE_S
    try:
        while error is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error()
    except KafkaException as exc:
        error = exc.args[0]
    finally:
        consumer.close()
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error


@pytest.mark.parametrize("mechanism, tls", [("PLAIN", False), ("SCRAM-SHA-256", False), ("SCRAM-SHA-256", True)])
def test_kafka_python_produces_and_consumes(kafka: str, cert: CertificatePair, mechanism: str, tls: bool) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    auth: dict[str, Any] = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                            "sasl_plain_username": "writer", "sasl_plain_password": USERS["writer"]}
    if tls:
        auth |= {"security_protocol": "SASL_SSL", "ssl_cafile": str(cert.cert_path)}
    values = [f"kp {mechanism} {tls} {i}".encode() for i in range(5)]
    producer = KafkaProducer(bootstrap_servers=kafka, acks="all", **auth)
    sent = [producer.send(TOPIC, v, partition=0) for v in values]
    producer.flush(DEADLINE_S)
    first = sent[0].get(timeout=DEADLINE_S).offset
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=kafka, enable_auto_commit=False, fetch_max_wait_ms=200, **auth)
    consumer.assign([KTP(TOPIC, 0)])
    consumer.seek(KTP(TOPIC, 0), first)
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < len(values) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got[:len(values)] == values


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_aiokafka_produces_and_consumes(kafka: str, mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": "writer", "sasl_plain_password": USERS["writer"]}
    values = [f"aio {mechanism} {i}".encode() for i in range(5)]

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka, **auth)
        await producer.start()
        try:
            first = (await producer.send_and_wait(TOPIC, values[0], partition=0)).offset
            for v in values[1:]:
                await producer.send_and_wait(TOPIC, v, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka, enable_auto_commit=False, fetch_max_wait_ms=200, **auth)
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([ATP(TOPIC, 0)])
            consumer.seek(ATP(TOPIC, 0), first)
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < len(values) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run())[:len(values)] == values


def test_kafka_python_wrong_password_is_an_authentication_error(kafka: str, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python keeps retrying its bootstrap until bootstrap_timeout_ms; each attempt
    reads the broker's SASL_AUTHENTICATION_FAILED (a lost connection if it were closed early)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    caplog.set_level(logging.WARNING, logger="kafka")
    with pytest.raises(KafkaTimeoutError):
        KafkaProducer(bootstrap_servers=kafka, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                      sasl_plain_username="writer", sasl_plain_password="wrong-secret", bootstrap_timeout_ms=3_000)
    attempts = [r.getMessage() for r in caplog.records if "Bootstrap connection" in r.getMessage()]
    assert attempts and all("SaslAuthenticationFailedError" in a and "wrong password for User:writer" in a
                            for a in attempts), attempts


# -- plain ACL (RocketMQ 4.x) --------------------------------------------------------------

PLAIN_ACL = """
accounts:
  - accessKey: app-user
    secretKey: app-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [KOpen=PUB|SUB, KReadOnly=SUB]
  - accessKey: admin-user
    secretKey: admin-secret-1
    admin: true
"""


def test_plain_acl_accounts_are_the_kafka_users(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under aclEnable the listener serves plain_acl.yml's accounts (accessKey/secretKey as the
    SASL username/password) with their permissions, as the gRPC door does."""
    acl = tmp_path_factory.mktemp("kafka-plain-acl") / "plain_acl.yml"
    acl.write_text(PLAIN_ACL)
    port = free_port()
    args = [f"--kafkaListenPort={port}", "--aclEnable=true", f"--plainAclFile={acl}"]
    with Cluster(tmp_path_factory.mktemp("kafka-plain-acl-broker"), broker_args=args):
        bootstrap = f"127.0.0.1:{port}"
        admin = Wire(bootstrap)
        assert handshake(admin)["error_code"] == 0
        assert authenticate(admin, plain("admin-user", "admin-secret-1"))["error_code"] == 0
        made = admin.call(ApiKey.METADATA, 5, {"topics": [{"name": "KOpen"}, {"name": "KReadOnly"}],
                                               "allow_auto_topic_creation": True})
        assert [t["error_code"] for t in made["topics"]] == [0, 0]
        admin.close()
        wire = Wire(bootstrap)
        assert handshake(wire)["error_code"] == 0
        assert authenticate(wire, plain("app-user", "app-secret-1"))["error_code"] == 0
        for topic, code in (("KOpen", 0), ("KReadOnly", ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
            produced = wire.call(ApiKey.PRODUCE, 7, produce_body(topic, batch(b"plain acl")))
            assert produced["responses"][0]["partition_responses"][0]["error_code"] == code, topic
        wire.close()
        wrong = Wire(bootstrap)
        assert handshake(wrong)["error_code"] == 0
        assert authenticate(wrong, plain("app-user", "wrong-secret"))["error_code"] == \
            ErrorCode.SASL_AUTHENTICATION_FAILED
        wrong.close()
