"""Plain ACL on a real broker: our client signs with the right keys and is served; no keys,
a wrong secret, a DENY or SUB-only topic, a denied group, a non-admin deleting a topic and a
tampered request are refused with NO_PERMISSION and a reason; the file reloads when it changes."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skiff.client import (
    AsyncAdmin,
    AsyncProducer,
    AsyncPullClient,
    AsyncPushConsumer,
    ConsumeFromWhere,
    ConsumeStatus,
    Credentials,
    Message,
    MessageQueue,
)
from skiff.client._impl.config import ClientConfig
from skiff.client.errors import SendFailedError
from skiff.broker.auth.signature import authorization_header, date_time_now
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import NoPermissionError
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire
from skiff.testing.processes import broker_args, free_port, run_skiff
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire, send_header
from skiff.transport.loop import run_coroutine

ADMIN = Credentials("admin-user", "admin-secret-1")
APP = Credentials("app-user", "app-secret-1")
ACL = """
accounts:
  - accessKey: app-user
    secretKey: app-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Open=PUB|SUB, ReadOnly=SUB, Denied={denied}]
    groupPerms: [BadGroup=DENY]
  - accessKey: admin-user
    secretKey: admin-secret-1
    admin: true
"""
TOPICS = ("Open", "ReadOnly", "Denied")


@pytest.fixture(scope="module")
def acl_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acl-conf") / "plain_acl.yml"
    path.write_text(ACL.format(denied="DENY"))
    return path


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, acl_file: Path, metrics_port: int):
    grpc_port = free_port()
    args = ["--aclEnable=true", f"--plainAclFile={acl_file}", "--aclReloadInterval=100",
            f"--metricsPort={metrics_port}", f"--grpcServerPort={grpc_port}"]
    with Cluster(tmp_path_factory.mktemp("acl"), broker_args=args) as c:
        c.grpc_endpoint = f"127.0.0.1:{grpc_port}"  # type: ignore[attr-defined]
        async def create() -> None:
            async with AsyncAdmin(client_config=config(c, "acl-admin", ADMIN)) as admin:
                for topic in TOPICS:
                    await admin.create_topic(topic, queue_nums=1)
        run_coroutine(create())
        yield c


def config(cluster: Cluster, name: str, creds: Credentials | None) -> ClientConfig:
    return ClientConfig(cluster.namesrv_addr, instance_name=name, client_ip="127.0.0.1", credentials=creds)


async def send(cluster: Cluster, topic: str, creds: Credentials | None, body: bytes = b"hello") -> int:
    async with AsyncProducer("PG-acl", client_config=config(cluster, f"acl-p-{topic}", creds), trace=False,
                             retry_times_when_send_failed=0) as producer:
        result = await producer.send(Message(topic, body))
        return result.queue_offset


def refused_send(cluster: Cluster, topic: str, creds: Credentials | None) -> str:
    """The reason the broker gave for refusing a send (the producer retries NO_PERMISSION, as RocketMQ's does,
    and then raises SendFailedError caused by it)."""
    with pytest.raises(SendFailedError) as info:
        run_coroutine(send(cluster, topic, creds))
    assert isinstance(info.value.__cause__, NoPermissionError), info.value
    return str(info.value.__cause__)


def mq(cluster: Cluster, topic: str) -> MessageQueue:
    return MessageQueue(topic, Cluster.broker_name(0), 0)


def test_right_keys_send_and_pull_what_was_sent(cluster: Cluster) -> None:
    async def main() -> None:
        offset = await send(cluster, "Open", APP, b"for-acl")
        async with AsyncPullClient(client_config=config(cluster, "acl-pull", APP), group="G1") as puller:
            result = await puller.pull(mq(cluster, "Open"), offset, 8)
        assert [m.body for m in result.messages] == [b"for-acl"]
    run_coroutine(main())


@pytest.mark.parametrize(("creds", "reason"), [
    (None, "no AccessKey"),
    (Credentials("app-user", "not-the-secret"), "signature check failed"),
    (Credentials("stranger", "whatever-1"), "no ACL account"),
])
def test_no_keys_or_wrong_keys_are_refused(cluster: Cluster, creds: Credentials | None, reason: str) -> None:
    why = refused_send(cluster, "Open", creds)
    assert reason in why and "not-the-secret" not in why
    out = cluster.broker(0).wait_for_line(f"ACL refused request code .* from 127.0.0.1:.*{reason}")
    assert "not-the-secret" not in cluster.broker(0).output and out


def test_deny_and_sub_only_topics_refuse_sends(cluster: Cluster, metrics_port: int) -> None:
    before = refused_total(metrics_port)
    for topic in ("ReadOnly", "Denied"):
        assert f"no PUB permission on topic {topic}" in refused_send(cluster, topic, APP)
    assert refused_total(metrics_port) >= before + 2  # one refusal per send attempt at least


def refused_total(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "skiff_acl_refused_requests_total")


def test_pulls_and_offset_updates_need_sub(cluster: Cluster) -> None:
    async def main() -> None:
        async with AsyncPullClient(client_config=config(cluster, "acl-pull2", APP), group="G2") as puller:
            await puller.pull(mq(cluster, "ReadOnly"), 0, 8)  # SUB is enough to pull
            with pytest.raises(NoPermissionError, match="topic Denied"):
                await puller.pull(mq(cluster, "Denied"), 0, 8)
        async with AsyncPullClient(client_config=config(cluster, "acl-pull3", APP), group="BadGroup") as puller:
            with pytest.raises(NoPermissionError, match="group BadGroup"):
                await puller.pull(mq(cluster, "Open"), 0, 8)
        async with AsyncAdmin(client_config=config(cluster, "acl-app-admin", APP)) as app:
            await app.update_consumer_offset("G3", mq(cluster, "Open"), 0)
            assert await app.fetch_consumer_offset("G3", mq(cluster, "Open")) == 0
            with pytest.raises(NoPermissionError, match="topic Denied"):
                await app.update_consumer_offset("G3", mq(cluster, "Denied"), 0)
            with pytest.raises(NoPermissionError, match="group BadGroup"):
                await app.update_consumer_offset("BadGroup", mq(cluster, "Open"), 0)
    run_coroutine(main())


def test_only_an_admin_deletes_a_topic(cluster: Cluster) -> None:
    async def main() -> None:
        async with AsyncAdmin(client_config=config(cluster, "acl-app-admin2", APP)) as app:
            with pytest.raises(NoPermissionError, match="needs an admin account"):
                await app.delete_topic("Open")
        async with AsyncAdmin(client_config=config(cluster, "acl-admin2", ADMIN)) as admin:
            assert [q.mq.topic for q in await admin.topic_status("Open")] == ["Open"]
    run_coroutine(main())


def test_tampered_request_fails_the_signature(cluster: Cluster) -> None:
    async def main() -> None:
        wire = BrokerWire(cluster.broker_addr(0))
        try:
            def signed() -> RemotingCommand:
                code = RequestCode.SEND_MESSAGE_V2
                cmd = RemotingCommand.request(code, send_header(code, "Open", 0, ""), b"original")
                sign_command(cmd, APP.access_key, APP.secret_key)
                return cmd
            ok = await wire.client.invoke(wire.addr, signed(), 3000)
            assert ok.code == ResponseCode.SUCCESS, ok.remark
            tampered = signed()
            tampered.body = b"changed!"
            resp = await wire.client.invoke(wire.addr, tampered, 3000)
            assert (resp.code, "signature check failed" in (resp.remark or "")) == (ResponseCode.NO_PERMISSION, True)
        finally:
            await wire.close()
    run_coroutine(main())


def test_changed_file_is_reloaded_and_a_broken_one_ignored(cluster: Cluster, acl_file: Path) -> None:
    acl_file.write_text(ACL.format(denied="PUB"))

    async def sends() -> bool:
        try:
            await send(cluster, "Denied", APP)
        except SendFailedError:
            return False
        return True
    run_coroutine(eventually(sends, 15, "the reloaded ACL letting app-user send to Denied"))
    start = len(cluster.broker(0).output.splitlines())
    acl_file.write_text("accounts: [ {accessKey: app-user, secretKey: ")
    cluster.broker(0).wait_for_line("ACL file changed but is not used", start=start)
    assert run_coroutine(sends())
    acl_file.write_text(ACL.format(denied="DENY"))
    run_coroutine(eventually(lambda: _refused(cluster), 15, "the DENY coming back"))


async def _refused(cluster: Cluster) -> bool:
    try:
        await send(cluster, "Denied", APP)
    except SendFailedError as exc:
        return isinstance(exc.__cause__, NoPermissionError)
    return False


async def grpc_send(cluster: Cluster, topic: str, creds: Credentials) -> Any:
    """A gRPC SendMessage signed as the 5.x clients sign (docs/acl.md): its Status."""
    wire = GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
    date = date_time_now()
    wire.metadata = (("x-mq-client-id", "acl-grpc"), ("x-mq-date-time", date),
                     ("authorization", authorization_header(creds.access_key, creds.secret_key, date)))
    try:
        return (await wire.send(topic, [b"over-grpc"])).status
    finally:
        await wire.close()


def test_grpc_door_checks_the_same_accounts(cluster: Cluster, acl_file: Path) -> None:
    """Under plain ACL the gRPC endpoint runs too, checking plain_acl.yml's accounts as ACL 2.0
    policies (migrated in memory), and a reload of the file reaches it."""
    ok = run_coroutine(grpc_send(cluster, "Open", APP))
    assert ok.code == pb.OK, ok.message
    wrong = run_coroutine(grpc_send(cluster, "Open", Credentials("app-user", "not-the-secret")))
    assert (wrong.code, wrong.message) == (pb.UNAUTHORIZED, "check signature failed for User:app-user")
    denied = run_coroutine(grpc_send(cluster, "Denied", APP))
    assert denied.code == pb.FORBIDDEN and "User:app-user has no permission for Pub on Topic:Denied" in denied.message
    assert run_coroutine(grpc_send(cluster, "Denied", ADMIN)).code == pb.OK, "an admin account is a Super user"
    acl_file.write_text(ACL.format(denied="PUB"))
    try:
        async def allowed() -> bool:
            return (await grpc_send(cluster, "Denied", APP)).code == pb.OK
        run_coroutine(eventually(allowed, 15, "the reloaded file letting app-user send to Denied over gRPC"))
    finally:
        acl_file.write_text(ACL.format(denied="DENY"))
        run_coroutine(eventually(lambda: _refused(cluster), 15, "the DENY coming back"))


def test_cli_signs_with_flags_file_or_environment(cluster: Cluster, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ns = ["-n", cluster.namesrv_addr]
    keys = ["--access-key", APP.access_key, "--secret-key", APP.secret_key]
    refused = run_skiff(["topic", "delete", "-t", "Open", *ns, *keys])
    assert refused.returncode == 1 and "NO_PERMISSION" in refused.stdout and "needs an admin" in refused.stdout
    assert APP.secret_key not in refused.stdout
    unsigned = run_skiff(["send", *ns, "-t", "Open", "unsigned"])
    assert unsigned.returncode == 1 and "no AccessKey" in unsigned.stdout
    tools = tmp_path / "tools.yml"
    tools.write_text(f"accessKey: {APP.access_key}\nsecretKey: {APP.secret_key}\n")
    by_file = run_skiff(["send", *ns, "-t", "Open", "signed-by-file", "--credentials", str(tools), "--json"])
    assert by_file.returncode == 0, by_file.stdout
    monkeypatch.setenv("SKIFF_ACCESS_KEY", APP.access_key)
    monkeypatch.setenv("SKIFF_SECRET_KEY", APP.secret_key)
    by_env = run_skiff(["send", *ns, "-t", "Open", "signed-by-env", "--json"])
    assert by_env.returncode == 0, by_env.stdout

    async def bodies() -> list[bytes]:
        async with AsyncPullClient(client_config=config(cluster, "acl-pull-cli", APP), group="G4") as puller:
            return [m.body for m in (await puller.pull(mq(cluster, "Open"), 0, 64)).messages]
    got = run_coroutine(bodies())
    assert b"signed-by-file" in got and b"signed-by-env" in got and b"unsigned" not in got


@pytest.mark.parametrize(("content", "reason"), [
    (None, "does not exist"),
    ("accounts:\n  - accessKey: a\n    secretKey: topsecret77\n    defaultTopicPerm: WRITE\n",
     "defaultTopicPerm: 'WRITE' is not DENY, PUB, SUB or PUB|SUB"),
    ("accounts: [ {accessKey: a, secretKey: ", "not valid YAML"),
])
def test_broker_does_not_start_without_a_usable_acl_file(tmp_path: Path, content: str | None, reason: str) -> None:
    path = tmp_path / "plain_acl.yml"
    if content is not None:
        path.write_text(content)
    done = run_skiff(broker_args(tmp_path / "store", "", "--aclEnable=true", f"--plainAclFile={path}"))
    assert done.returncode == 2 and reason in done.stdout, done.stdout
    assert "topsecret77" not in done.stdout


async def consume_with_one_retry(cluster: Cluster, group: str, topic: str, creds: Credentials,
                                 count: int) -> AsyncPushConsumer:
    """A push consumer signing with ``creds`` that consumes ``push-0`` .. ``push-{count-1}``, asking for
    ``push-0`` again once (back through the group's retry topic); returned running, once it has."""
    seen: list[tuple[bytes, int]] = []
    consumer = AsyncPushConsumer(group, client_config=ClientConfig(
        cluster.namesrv_addr, instance_name=f"acl-push-{group}", client_ip="127.0.0.1", credentials=creds,
        rebalance_interval_ms=500, heartbeat_broker_interval_ms=500, persist_consumer_offset_interval_ms=300),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, trace=False)
    consumer.subscribe(topic, "*")

    def listener(msgs: list, ctx: Any) -> ConsumeStatus:
        seen.extend((m.body, m.reconsume_times) for m in msgs)
        if any(m.reconsume_times == 0 and m.body == b"push-0" for m in msgs):
            ctx.delay_level_when_next_consume = 1
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS
    consumer.register_listener(listener)
    await consumer.start()
    try:
        await eventually(lambda: {(b"push-0", 1)} <= set(seen) and
                         {f"push-{i}".encode() for i in range(count)} <= {b for b, _ in seen}, 30,
                         "every message, and push-0 again from the retry topic")
    except BaseException:
        await consumer.shutdown()
        raise
    return consumer


def test_push_consumer_with_keys_consumes_retries_and_commits(cluster: Cluster) -> None:
    """Heartbeats, long-polling pulls, a send-back to the retry topic, the retry topic's pulls and the
    offset commits all pass signed; the committed offsets reach what was sent."""
    async def main() -> None:
        offsets = [await send(cluster, "Open", APP, f"push-{i}".encode()) for i in range(4)]
        consumer = await consume_with_one_retry(cluster, "PushG", "Open", APP, 4)
        try:
            mq = MessageQueue("Open", Cluster.broker_name(0), 0)
            async with AsyncAdmin(client_config=config(cluster, "acl-push-admin", ADMIN)) as admin:
                async def committed() -> bool:
                    return (await admin.fetch_consumer_offset("PushG", mq) or 0) > max(offsets)
                await eventually(committed, 30, "the push consumer's signed offset commit")
        finally:
            await consumer.shutdown()
    run_coroutine(main())
