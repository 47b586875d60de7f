"""Permissive TLS with a real plaintext client: the RocketMQ C++ client (PyPI `rocketmq` 0.4.4,
which has no TLS at all) sends in plaintext to a NameServer and a broker in
``tls.server.mode=permissive``, and Skiff's client reads the same messages over TLS from the same
ports. The C++ client sees nothing of TLS, as permissive promises."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, AsyncPullClient, ClientConfig, TlsClientConfig
from skiff.client.results import PullStatus
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually
from skiff.transport.certificates import write_self_signed
from skiff.transport.loop import run_coroutine
from tests.interop._cpp import cpp_python, produce

pytestmark = pytest.mark.interop

TOPIC = "CppTls"


def test_a_plaintext_cpp_producer_and_a_tls_reader_on_the_same_ports(tmp_path: Path):
    cpp_python()
    pair = write_self_signed(tmp_path / "certs")
    keys = ["--tls.server.mode=permissive", f"--tls.server.certPath={pair.cert_path}",
            f"--tls.server.keyPath={pair.key_path}"]
    tls = TlsClientConfig(auth_server=True, trust_cert_path=str(pair.cert_path))
    with Cluster(tmp_path / "cluster", namesrv_args=keys, broker_args=keys) as cluster:
        ns = cluster.namesrv_addr

        async def create() -> None:
            async with AsyncAdmin(client_config=ClientConfig(ns, "cpp-tls-admin", tls=tls)) as admin:
                await admin.create_topic(TOPIC, queue_nums=2)
        run_coroutine(create())

        sent = produce(tmp_path / "home", ns, TOPIC, [{"body": f"cpp-{i}", "keys": f"k{i}"} for i in range(6)])
        assert [r["status"] for r in sent] == ["OK"] * 6

        async def read() -> dict[str, bytes]:
            async with AsyncPullClient(client_config=ClientConfig(ns, "cpp-tls-reader", tls=tls)) as client:
                queues = await client.fetch_subscribe_queues(TOPIC)

                async def everything() -> dict[str, bytes] | None:
                    got = {}
                    for mq in queues:
                        result = await client.pull(mq, 0, 32)
                        if result.status is PullStatus.FOUND:
                            got.update({m.msg_id: m.body for m in result.messages})
                    return got if len(got) >= 6 else None

                return await eventually(everything, 10, "the C++ client's messages pulled over TLS")

        got = run_coroutine(read())
        assert got == {r["msg_id"]: f"cpp-{i}".encode() for i, r in enumerate(sent)}
