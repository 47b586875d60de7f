"""ACL 2.0 on a real broker, through both doors: users and ACLs made with the AUTH_* admin
requests (our admin client, signed by the Super user broker.conf creates), then the same cases
over remoting (signed frames) and gRPC (the 5.x authorization header) — the right secret is
served and what was sent is read back; a wrong secret, an unknown user, a denied action, a
source address outside the policy, a garbled or stale signature are refused on both, each with a
reason that names the user and never the secret; and the refusals are logged with peer and user."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from skiff.broker.auth.signature import authorization_header, date_time_now
from skiff.cli.main import main as cli_main
from skiff.client import AsyncAdmin, AsyncProducer, Credentials
from skiff.client._impl.config import ClientConfig
from skiff.common.message import Message
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import NoPermissionError
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, first_status
from skiff.testing.processes import free_port
from skiff.testing.wire import BrokerWire, send_header
from skiff.transport.loop import run_coroutine
from tests.integration.test_acl import consume_with_one_retry

pytestmark = pytest.mark.xdist_group("acl2")  # one broker for the module, on one worker

ROOT = Credentials("root", "root-secret-1")
APP = Credentials("app", "app-secret-1")
FAR = Credentials("far", "far-secret-1")
OPEN, CLOSED, GROUP = "Acl2Open", "Acl2Closed", "acl2-group"
SECRETS = ("root-secret-1", "app-secret-1", "far-secret-1", "wrong-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    args = [f"--grpcServerPort={port}", "--authenticationEnabled=true", "--authorizationEnabled=true",
            '--initAuthenticationUser={"username":"root","password":"root-secret-1"}']
    with Cluster(tmp_path_factory.mktemp("acl2"), broker_args=args) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        run_coroutine(prepare(c))
        yield c


async def prepare(c: Cluster) -> None:
    config = ClientConfig(c.namesrv_addr, instance_name="acl2-admin", client_ip="127.0.0.1", credentials=ROOT)
    async with AsyncAdmin(client_config=config) as admin:
        for topic in (OPEN, CLOSED):
            await admin.create_topic(topic, queue_nums=1)
        await admin.create_user("app", "app-secret-1")
        await admin.create_user("far", "far-secret-1")
        await admin.set_acl("User:app", [f"Topic:{OPEN}", f"Group:{GROUP}"], ["Pub", "Sub"], "Allow", create=True)
        await admin.set_acl("User:app", ["Topic:Acl2*"], ["All"], "Deny")
        await admin.set_acl("User:far", [f"Topic:{OPEN}"], ["Pub"], "Allow", source_ips=["10.0.0.0/8"])
        users = {u["username"]: u for u in await admin.users()}
        assert set(users) == {"root", "app", "far"} and users["root"]["userType"] == "Super"
        acl = await admin.get_acl("User:app")
        entries = {e["resource"]: e["decision"] for p in acl["policies"] for e in p["entries"]}
        assert entries == {f"Topic:{OPEN}": "Allow", f"Group:{GROUP}": "Allow", "Topic:Acl2*": "Deny"}


# -- the two doors -------------------------------------------------------------------

class SignedWire(BrokerWire):
    """Every request signed with ``creds`` (a signature garbled after signing, when asked)."""

    def __init__(self, addr: str, creds: Credentials | None, garble: bool = False) -> None:
        super().__init__(addr)
        self.creds, self.garble = creds, garble

    async def call(self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", *,
                   timeout_ms: int | None = None) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body)
        if self.creds is not None:
            sign_command(cmd, self.creds.access_key, self.creds.secret_key)
        if self.garble and cmd.ext_fields is not None:
            cmd.ext_fields["Signature"] = "not-a-signature"
        return await self.client.invoke(self.addr, cmd, timeout_ms or self.timeout_ms)


async def remoting_send(c: Cluster, topic: str, creds: Credentials | None, *, garble: bool = False) -> RemotingCommand:
    wire = SignedWire(c.broker_addr(), creds, garble)
    try:
        return await wire.call(RequestCode.SEND_MESSAGE_V2, send_header(RequestCode.SEND_MESSAGE_V2, topic, 0, ""),
                               b"hi")
    finally:
        await wire.close()


def grpc_metadata(creds: Credentials | None, *, date: str | None = None, garble: bool = False) -> tuple:
    meta: tuple = (("x-mq-client-id", "acl2-grpc-client"),)
    if creds is None:
        return meta
    date = date or date_time_now()
    header = authorization_header(creds.access_key, creds.secret_key, date)
    if garble:
        header = header.rsplit("=", 1)[0] + "=zz-not-hex"
    return meta + (("x-mq-date-time", date), ("authorization", header))


async def grpc_send(c: Cluster, topic: str, creds: Credentials | None, **how: object) -> pb.Status:
    wire = GrpcWire(c.grpc_endpoint)  # type: ignore[attr-defined]
    wire.metadata = grpc_metadata(creds, **how)  # type: ignore[arg-type]
    try:
        return (await wire.send(topic, [b"hi"])).status
    finally:
        await wire.close()


def both(c: Cluster, topic: str, creds: Credentials | None, **how: object) -> tuple[RemotingCommand, pb.Status]:
    remoting_how = {"garble": how["garble"]} if "garble" in how else {}
    async def main() -> tuple[RemotingCommand, pb.Status]:
        return (await remoting_send(c, topic, creds, **remoting_how),  # type: ignore[arg-type]
                await grpc_send(c, topic, creds, **how))
    return run_coroutine(main())


def test_right_secret_sends_on_both_doors_and_the_messages_are_there(cluster: Cluster) -> None:
    resp, status = both(cluster, OPEN, APP)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert status.code == pb.OK, status.message

    async def read() -> list[bytes]:
        wire = SignedWire(cluster.broker_addr(), APP)
        try:
            return [m.body for m in await wire.pull_messages(GROUP, OPEN, 0)]
        finally:
            await wire.close()
    assert run_coroutine(read()) == [b"hi", b"hi"], "one message through each door, in order"


def test_our_producer_and_push_consumer_with_a_retry(cluster: Cluster) -> None:
    """Skiff's own client, signing every request: sends, heartbeats, rebalance, queue locks, pulls of
    the topic and of the group's retry topic, a message sent back for redelivery, offset commits."""
    async def main() -> None:
        config = ClientConfig(cluster.namesrv_addr, instance_name="acl2-p", client_ip="127.0.0.1", credentials=APP)
        async with AsyncProducer("acl2-pg", client_config=config, trace=False) as producer:
            for i in range(4):
                await producer.send(Message(OPEN, f"push-{i}".encode()))
        consumer = await consume_with_one_retry(cluster, GROUP, OPEN, APP, 4)
        await consumer.shutdown()
    run_coroutine(main())

    async def retried() -> int:
        wire = SignedWire(cluster.broker_addr(), ROOT)
        try:
            resp = await wire.call(RequestCode.GET_MAX_OFFSET, {"topic": f"%RETRY%{GROUP}", "queueId": "0"})
            return int(resp.ext("offset") or 0)
        finally:
            await wire.close()
    assert run_coroutine(retried()) == 1, "push-0 went back through the broker (CONSUMER_SEND_MSG_BACK, signed)"


@pytest.mark.parametrize(("creds", "how", "reason", "grpc_code"), [
    (Credentials("app", "wrong-secret"), {}, "check signature failed for User:app", pb.UNAUTHORIZED),
    (Credentials("ghost", "wrong-secret"), {}, "User:ghost is not found", pb.UNAUTHORIZED),
    (None, {}, "username cannot be null", pb.UNAUTHORIZED),
    (APP, {"garble": True}, "", pb.UNAUTHORIZED),
], ids=["wrong secret", "unknown user", "no credentials", "garbled signature"])
def test_authentication_refusals_alike_on_both_doors(cluster: Cluster, creds: Credentials | None, how: dict,
                                                     reason: str, grpc_code: int) -> None:
    resp, status = both(cluster, OPEN, creds, **how)
    assert resp.code == ResponseCode.NO_PERMISSION and reason in resp.remark, resp.remark
    assert status.code == grpc_code and reason in status.message, status.message
    for text in (resp.remark, status.message):
        assert not any(secret in text for secret in SECRETS)


def test_a_stale_grpc_date_time_is_refused(cluster: Cluster) -> None:
    """The replay window: a correctly signed call whose x-mq-date-time is 10 minutes old."""
    status = run_coroutine(grpc_send(cluster, OPEN, APP, date=date_time_now(time.time() - 600)))
    assert status.code == pb.UNAUTHORIZED and "from the broker's clock" in status.message, status.message


@pytest.mark.parametrize(("topic", "creds", "reason"), [
    (CLOSED, APP, f"User:app has no permission for Pub on Topic:{CLOSED} from 127.0.0.1: denied by the entry for "
                  f"Topic:Acl2*"),
    (OPEN, FAR, f"User:far has no permission for Pub on Topic:{OPEN} from 127.0.0.1: no matching policy"),
], ids=["denied action", "source ip outside the policy"])
def test_authorization_refusals_alike_on_both_doors(cluster: Cluster, topic: str, creds: Credentials,
                                                    reason: str) -> None:
    resp, status = both(cluster, topic, creds)
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, reason)
    assert (status.code, status.message) == (pb.FORBIDDEN, reason)
    cluster.broker(0).wait_for_line(f"authorization refused request .* from 127.0.0.1 .user {creds.access_key}.")


def test_grpc_reads_and_routes_are_authorized(cluster: Cluster) -> None:
    async def main() -> tuple[pb.Status, pb.Status, pb.Status]:
        wire = GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        wire.metadata = grpc_metadata(APP)
        try:
            route_ok = (await wire.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=OPEN)),
                                         rpc.QueryRouteResponse)).status
            route_no = (await wire.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=CLOSED)),
                                         rpc.QueryRouteResponse)).status
            pulled = first_status(await wire.pull("other-group", OPEN, 0))
            return route_ok, route_no, pulled
        finally:
            await wire.close()
    route_ok, route_no, pulled = run_coroutine(main())
    assert route_ok.code == pb.OK, route_ok.message
    assert route_no.code == pb.FORBIDDEN and f"Topic:{CLOSED}" in route_no.message
    assert pulled.code == pb.FORBIDDEN and "Group:other-group" in pulled.message


def test_only_a_super_user_manages_users(cluster: Cluster) -> None:
    async def main() -> None:
        config = ClientConfig(cluster.namesrv_addr, instance_name="acl2-app-admin", client_ip="127.0.0.1",
                              credentials=APP)
        async with AsyncAdmin(client_config=config) as admin:
            with pytest.raises(NoPermissionError, match="Cluster:DefaultCluster"):
                await admin.create_user("sneaky", "pw-1", user_type="Super")
            with pytest.raises(NoPermissionError, match="Cluster:DefaultCluster"):
                await admin.users()
    run_coroutine(main())


# -- the CLI ---------------------------------------------------------------------------

SAMPLE_PLAIN_ACL = """
globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def run_cli(c: Cluster, *args: str, creds: Credentials = ROOT) -> tuple[int, str]:
    """``skiff ARGS`` in this process (the same parser and handlers as the command; no interpreter
    start per call): its exit status and what it printed on stdout and stderr."""
    out = io.StringIO()
    argv = [*args, "-n", c.namesrv_addr, "--access-key", creds.access_key, "--secret-key", creds.secret_key]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = cli_main(argv)
    return code, out.getvalue()


def skiff(c: Cluster, *args: str, creds: Credentials = ROOT) -> str:
    code, out = run_cli(c, *args, creds=creds)
    assert code == 0, out
    return out


def test_cli_users_acls_and_migration(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("cli-secret-1\n")
    (tmp_path / "plain_acl.yml").write_text(SAMPLE_PLAIN_ACL)
    skiff(cluster, "user", "create", "cli-user", "--password-file", str(tmp_path / "pw"))
    skiff(cluster, "acl", "create", "User:cli-user", "-r", f"Topic:{OPEN},Group:cli*", "-a", "Pub,Sub", "-d",
          "Allow", "-i", "127.0.0.1,10.0.0.0/8")
    migrated = skiff(cluster, "acl", "migrate", str(tmp_path / "plain_acl.yml"))
    assert "not migrated (no ACL 2.0 form): globalWhiteRemoteAddresses" in migrated and "12345678" not in migrated
    users = {u["username"]: u for u in json.loads(skiff(cluster, "user", "list", "--json"))}
    assert {"cli-user", "RocketMQ", "rocketmq2"} <= set(users)
    assert users["rocketmq2"]["userType"] == "Super" and users["cli-user"]["password"] == "********"
    acls = {a["subject"]: a for a in json.loads(skiff(cluster, "acl", "list", "--json"))}
    cli = {e["resource"]: (e["actions"], e["sourceIps"]) for p in acls["User:cli-user"]["policies"]
           for e in p["entries"]}
    assert cli == {f"Topic:{OPEN}": (["Pub", "Sub"], ["127.0.0.1/32", "10.0.0.0/8"]),
                   "Group:cli*": (["Pub", "Sub"], ["127.0.0.1/32", "10.0.0.0/8"])}
    policies = {p["policyType"]: {e["resource"]: e["decision"] for e in p["entries"]}
                for p in acls["User:RocketMQ"]["policies"]}
    assert policies == {"Custom": {"Topic:topicA": "Deny", "Topic:topicB": "Allow", "Topic:topicC": "Allow",
                                   "Group:groupA": "Deny", "Group:groupB": "Allow", "Group:groupC": "Allow"},
                        "Default": {"Topic:*": "Deny", "Group:*": "Allow"}}
    # the migrated user signs with its 4.x keys and gets what plain_acl.yml gave it
    assert run_coroutine(remoting_send(cluster, OPEN, Credentials("cli-user", "cli-secret-1"))).code == 0
    code, out = run_cli(cluster, "user", "delete", "rocketmq2", creds=Credentials("cli-user", "cli-secret-1"))
    assert code == 1 and "User:cli-user has no permission for Update on Cluster:DefaultCluster" in out, out
    skiff(cluster, "user", "delete", "cli-user")
    assert "cli-user" not in skiff(cluster, "user", "list")
