"""The real RocketMQ C++ client (PyPI `rocketmq` 0.4.4, `set_session_credentials`) against a
broker with plain ACL: with the right keys it sends, consumes and commits offsets; with a wrong
secret, no keys, or to a SUB-only topic its sends are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, Credentials, MessageQueue
from skiff.client._impl.config import ClientConfig
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.transport.loop import run_coroutine
from tests.interop._cpp import PushConsumer, cpp_python, produce, run_script

pytestmark = pytest.mark.interop

ADMIN = Credentials("admin-user", "admin-secret-1")
ACL = """
accounts:
  - accessKey: cpp-user
    secretKey: cpp-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [CppOpen=PUB|SUB, CppReadOnly=SUB]
  - accessKey: admin-user
    secretKey: admin-secret-1
    admin: true
"""
RIGHT = ["cpp-user", "cpp-secret-1", "ALIYUN"]


def admin_config(cluster: Cluster) -> ClientConfig:
    return ClientConfig(cluster.namesrv_addr, instance_name="cpp-acl-admin", client_ip="127.0.0.1", credentials=ADMIN)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    cpp_python()
    acl = tmp_path_factory.mktemp("cpp-acl-conf") / "plain_acl.yml"
    acl.write_text(ACL)
    with Cluster(tmp_path_factory.mktemp("cpp-acl"), broker_args=["--aclEnable=true", f"--plainAclFile={acl}"]) as c:
        async def create() -> None:
            async with AsyncAdmin(client_config=admin_config(c)) as admin:
                for topic in ("CppOpen", "CppReadOnly"):
                    await admin.create_topic(topic, queue_nums=2)
        run_coroutine(create())
        yield c


def sends(cluster: Cluster, home: Path, topic: str, credentials: list[str] | None, n: int = 1) -> list[dict]:
    spec = {"namesrv": cluster.namesrv_addr, "group": "PG-cpp-acl", "topic": topic, "mode": "sync",
            "messages": [{"body": f"m{i}", "keys": f"k{i}"} for i in range(n)], "credentials": credentials}
    return run_script(home, "producer", spec)["results"]


def test_right_keys_send_consume_and_commit_offsets(cluster: Cluster, tmp_path: Path) -> None:
    messages = [{"body": f"acl-{i}", "keys": f"k{i}"} for i in range(6)]
    sent = produce(tmp_path, cluster.namesrv_addr, "CppOpen", messages, group="PG-cpp-acl", credentials=RIGHT)
    assert [r["status"] for r in sent] == ["OK"] * 6
    consumer = PushConsumer(tmp_path, cluster.namesrv_addr, "CG-cpp-acl", "CppOpen", credentials=RIGHT)
    try:
        got = consumer.wait_for(6, 60)
    finally:
        consumer.stop()
    assert sorted(m["body"] for m in got) == sorted(f"acl-{i}" for i in range(6))
    queues = {m["queue_id"] for m in got}

    async def committed() -> int | None:
        async with AsyncAdmin(client_config=admin_config(cluster)) as admin:
            total = 0
            for q in queues:
                offset = await admin.fetch_consumer_offset("CG-cpp-acl", MessageQueue("CppOpen", "broker-a", q))
                total += offset or 0
            return total if total == 6 else None
    assert run_coroutine(eventually(committed, 30, "the C++ consumer's signed offset commits")) == 6


@pytest.mark.parametrize(("topic", "credentials", "reason"), [
    ("CppOpen", ["cpp-user", "wrong-secret", "ALIYUN"], "signature check failed for accessKey 'cpp-user'"),
    ("CppOpen", None, "no AccessKey"),
    ("CppReadOnly", RIGHT, "no PUB permission on topic CppReadOnly"),
])
def test_wrong_keys_no_keys_or_sub_only_topic_are_refused(cluster: Cluster, tmp_path: Path, topic: str,
                                                          credentials: list[str] | None, reason: str) -> None:
    start = len(cluster.broker(0).output.splitlines())
    results = sends(cluster, tmp_path, topic, credentials)
    assert len(results) == 1 and "error" in results[0], results
    line = cluster.broker(0).wait_for_line(r"ACL refused request code (10|310) from 127\.0\.0\.1:\d+: .*" + reason,
                                           start=start)
    assert "wrong-secret" not in line.string
