"""Real clients against ACL 2.0: the official RocketMQ 5.x Python client over gRPC with session
credentials (its ``authorization`` header), and the RocketMQ C++ client with session credentials
over remoting (AccessKey/Signature), against one broker whose users and policies our admin
client made. The right secret sends and what was sent is received; a wrong secret, an unknown
user, a denied topic, a source address outside the policy and a signed date-time 9 hours off (the
Python client signs its local time: run in TZ=JST-9) are refused, on each door, with the
same reasons the broker logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, Credentials
from skiff.client._impl.config import ClientConfig
from skiff.testing.cluster import Cluster
from skiff.testing.processes import free_port
from skiff.transport.loop import run_coroutine
from tests.interop._cpp import cpp_python, run_script
from tests.interop.test_grpc_client import rmq5_python

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("acl2-real")]

SCRIPT = Path(__file__).resolve().parent / "grpc" / "acl2_client.py"
ROOT = Credentials("root", "root-secret-1")
OPEN, CLOSED, GROUP = "Acl2RealOpen", "Acl2RealClosed", "acl2-real-group"
CASES = {"right": ["app", "app-secret-1"], "wrong secret": ["app", "wrong-secret"],
         "unknown user": ["ghost", "ghost-secret"], "denied topic": ["app", "app-secret-1"],
         "outside source ips": ["far", "far-secret-1"],
         "clock 9 h off": ["app", "app-secret-1", "JST-9"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    port = free_port()
    args = [f"--grpcServerPort={port}", "--authenticationEnabled=true", "--authorizationEnabled=true",
            '--initAuthenticationUser={"username":"root","password":"root-secret-1"}']
    with Cluster(tmp_path_factory.mktemp("acl2-real"), broker_args=args) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]

        async def prepare() -> None:
            config = ClientConfig(c.namesrv_addr, instance_name="acl2-real-admin", client_ip="127.0.0.1",
                                  credentials=ROOT)
            async with AsyncAdmin(client_config=config) as admin:
                for topic in (OPEN, CLOSED):
                    await admin.create_topic(topic, queue_nums=2)
                await admin.create_user("app", "app-secret-1")
                await admin.create_user("far", "far-secret-1")
                await admin.set_acl("User:app", [f"Topic:{OPEN}", f"Group:{GROUP}"], ["Pub", "Sub"], "Allow")
                await admin.set_acl("User:app", [f"Topic:{CLOSED}"], ["Pub"], "Deny")
                await admin.set_acl("User:far", [f"Topic:{OPEN}", f"Topic:{CLOSED}"], ["Pub"], "Allow",
                                    source_ips=["192.0.2.0/24"])
        run_coroutine(prepare())
        yield c


def test_official_python_client_over_grpc(cluster: Cluster, tmp_path: Path) -> None:
    bodies = [f"py-{i}" for i in range(5)]
    results = {}
    for topic, names in ((OPEN, ["right", "wrong secret", "unknown user", "outside source ips", "clock 9 h off"]),
                         (CLOSED, ["right", "denied topic"])):
        spec = {"endpoint": cluster.grpc_endpoint, "topic": topic, "group": GROUP,  # type: ignore[attr-defined]
                "bodies": bodies if topic == OPEN else [], "cases": {n: CASES[n] for n in names}}
        if topic == CLOSED:  # the allowed first case needs nothing here: skip its send
            spec["cases"] = {"denied topic": CASES["denied topic"]}
            spec["cases"] = {"noop": ["app", "app-secret-1"], **spec["cases"]}
        env = {**os.environ, "HOME": str(tmp_path)}
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([rmq5_python(), str(SCRIPT), json.dumps(spec)], capture_output=True, text=True,
                              timeout=180, env=env, cwd=tmp_path)
        assert proc.returncode == 0, f"client failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        results.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    right = results["right"]
    assert len(right["sent"]) == 5 and sorted(right["got"]) == bodies, right
    broker = cluster.broker(0)
    for case, (kind, user, why) in {
            "wrong secret": ("authentication", "app", "check signature failed for User:app"),
            "unknown user": ("authentication", "ghost", "User:ghost is not found"),
            "clock 9 h off": ("authentication", "app", " s from the broker's clock (at most 300 s): a replayed call, "
                                                       "or a client clock or time zone off UTC"),
            "denied topic": ("authorization", "app", f"User:app has no permission for Pub/Sub on Topic:{CLOSED} "
                                                     f"from 127.0.0.1: denied by the entry for Topic:{CLOSED}"),
            "outside source ips": ("authorization", "far", f"User:far has no permission for Pub/Sub on Topic:{OPEN} "
                                                           f"from 127.0.0.1: no matching policy")}.items():
        # the client says only that it could not fetch the route; the broker says why
        assert "failed to fetch topic" in results[case].get("error", ""), (case, results[case])
        broker.wait_for_line(rf"{kind} refused request apache\.rocketmq\.v2\.QueryRouteRequest from 127\.0\.0\.1 "
                             rf"\(user {user}\): .*" + re.escape(why))
    assert "secret-1" not in broker.output

    async def landed() -> tuple[int, int]:
        config = ClientConfig(cluster.namesrv_addr, instance_name="acl2-real-check", client_ip="127.0.0.1",
                              credentials=ROOT)
        async with AsyncAdmin(client_config=config) as admin:
            status = {topic: sum(q.max_offset for q in await admin.topic_status(topic)) for topic in (OPEN, CLOSED)}
        return status[OPEN], status[CLOSED]
    assert run_coroutine(landed()) == (5, 0), "only the right secret's messages are stored"


def test_cpp_client_with_session_credentials_over_remoting(cluster: Cluster, tmp_path: Path) -> None:
    cpp_python()

    def sends(topic: str, creds: list[str], n: int = 1) -> list[dict]:
        spec = {"namesrv": cluster.namesrv_addr, "group": "PG-acl2-cpp", "topic": topic, "mode": "sync",
                "messages": [{"body": f"cpp-{i}", "keys": f"k{i}"} for i in range(n)], "credentials": creds}
        return run_script(tmp_path, "producer", spec)["results"]

    right = sends(OPEN, ["app", "app-secret-1", "ALIYUN"], 4)
    assert [r.get("status") for r in right] == ["SEND_OK"] * 4 or [r.get("status") for r in right] == ["OK"] * 4, right
    broker = cluster.broker(0)
    for topic, creds, kind, why in (
            (OPEN, ["app", "wrong-secret", "ALIYUN"], "authentication", "check signature failed for User:app"),
            (OPEN, ["ghost", "ghost-secret", "ALIYUN"], "authentication", "User:ghost is not found"),
            (OPEN, ["far", "far-secret-1", "ALIYUN"], "authorization",
             f"User:far has no permission for Pub on Topic:{OPEN} from 127.0.0.1: no matching policy"),
            (CLOSED, ["app", "app-secret-1", "ALIYUN"], "authorization",
             f"User:app has no permission for Pub on Topic:{CLOSED} from 127.0.0.1: denied by the entry for "
             f"Topic:{CLOSED}")):
        start = len(broker.output.splitlines())
        refused = sends(topic, creds)
        assert len(refused) == 1 and "error" in refused[0], (creds, refused)
        line = broker.wait_for_line(rf"{kind} refused request (10|310) from 127\.0\.0\.1 \(user {creds[0]}\): "
                                    + re.escape(why), start=start)
        assert "secret" not in line.string.split("(user")[1], line.string
