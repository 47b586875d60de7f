"""TLS between real processes: a NameServer in tls.server.mode=permissive (plaintext and TLS
clients on one port), a broker in enforcing mode that requires a client certificate (mutual
TLS) and registers with the NameServer over TLS, and Skiff's client and CLI connecting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.client import AsyncAdmin, AsyncProducer, AsyncPullClient, ClientConfig, Message, TlsClientConfig
from skiff.client.errors import ClientError, ConnectionClosed, SendFailedError
from skiff.protocol.errors import NoPermissionError
from skiff.client.results import PullStatus
from skiff.testing.cluster import Cluster
from skiff.testing.processes import run_skiff
from skiff.testing.waits import eventually
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import ENFORCING_REMARK

pytestmark = pytest.mark.xdist_group("tls")  # one cluster for the module, on one worker
TOPIC = "TlsTopic"


def server_keys(pair: CertificatePair, mode: str) -> list[str]:
    return [f"--tls.server.mode={mode}", f"--tls.server.certPath={pair.cert_path}",
            f"--tls.server.keyPath={pair.key_path}"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertificatePair]:
    d = tmp_path_factory.mktemp("certs")
    return {name: write_self_signed(d, name) for name in ("server", "client")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, certs: dict[str, CertificatePair]):
    server, client = certs["server"], certs["client"]
    broker = [*server_keys(server, "enforcing"), "--tls.server.need.client.auth=require",
              f"--tls.server.trustCertPath={client.cert_path}",
              # the broker dials the NameServer with TLS and verifies it
              "--tls.enable=true", "--tls.client.authServer=true", f"--tls.client.trustCertPath={server.cert_path}"]
    with Cluster(tmp_path_factory.mktemp("tls"), namesrv_args=server_keys(server, "permissive"),
                 broker_args=broker) as c:
        run_coroutine(_create_topic(c.namesrv_addr, mutual(certs)))
        yield c


def mutual(certs: dict[str, CertificatePair]) -> TlsClientConfig:
    """A client that shows its certificate and verifies the servers'."""
    return TlsClientConfig(str(certs["client"].cert_path), str(certs["client"].key_path), auth_server=True,
                           trust_cert_path=str(certs["server"].cert_path))


async def _create_topic(namesrv: str, tls: TlsClientConfig) -> None:
    async with AsyncAdmin(client_config=ClientConfig(namesrv, "tls-admin", tls=tls)) as admin:
        await admin.create_topic(TOPIC, queue_nums=2)


async def send(namesrv: str, tls: TlsClientConfig | None, bodies: list[bytes], instance: str) -> list[str]:
    config = ClientConfig(namesrv, instance, tls=tls)
    async with AsyncProducer("tls-producer", client_config=config) as producer:
        return [(await producer.send(Message(TOPIC, b))).msg_id for b in bodies]


async def read_all(namesrv: str, tls: TlsClientConfig, want: int) -> list[bytes]:
    async with AsyncPullClient(client_config=ClientConfig(namesrv, "tls-reader", tls=tls)) as client:
        queues = await client.fetch_subscribe_queues(TOPIC)

        async def everything() -> list[bytes] | None:
            bodies = []
            for mq in queues:
                result = await client.pull(mq, 0, 64)
                if result.status is PullStatus.FOUND:
                    bodies += [m.body for m in result.messages]
            return bodies if len(bodies) >= want else None

        return await eventually(everything, 10, f"{want} messages pulled over TLS")


def test_our_client_sends_and_consumes_over_mutual_tls(cluster: Cluster, certs):
    bodies = [f"m{i}".encode() for i in range(20)]
    ids = run_coroutine(send(cluster.namesrv_addr, mutual(certs), bodies, "tls-send"))
    assert len(set(ids)) == 20
    got = run_coroutine(read_all(cluster.namesrv_addr, mutual(certs), 20))
    assert sorted(b for b in got if b in bodies) == sorted(bodies)
    # the broker dials the NameServer with TLS and verifies it: no handshake of it failed
    # (tests/interop/test_grpc_tls.py has an enforcing NameServer, which only a TLS registration reaches)
    assert "TLS handshake" not in cluster.namesrv.output  # type: ignore[union-attr]


def test_a_plaintext_client_is_refused_with_the_reason_and_the_broker_keeps_serving(cluster: Cluster, certs):
    # the permissive NameServer answers it (plaintext), the enforcing broker refuses it, saying why
    with pytest.raises(SendFailedError, match="NO_PERMISSION .*accepts TLS connections only") as refused:
        run_coroutine(send(cluster.namesrv_addr, None, [b"plain"], "tls-plain"))
    # an attempt is refused with the reason, and the broker then closes that connection: an attempt
    # on a connection it already closed (the heartbeat's, a retry's) fails with the close instead
    errors = [exc for _, exc in refused.value.attempts]
    assert any(isinstance(e, NoPermissionError) for e in errors), errors
    assert all(isinstance(e, (NoPermissionError, ConnectionClosed)) for e in errors), errors
    cluster.broker().wait_for_line("refused a plaintext connection from 127.0.0.1:")
    assert ENFORCING_REMARK.startswith("this server accepts TLS connections only")
    assert run_coroutine(send(cluster.namesrv_addr, mutual(certs), [b"after"], "tls-after"))


def test_a_client_without_a_certificate_is_refused_by_mutual_tls(cluster: Cluster, certs):
    anonymous = TlsClientConfig(auth_server=True, trust_cert_path=str(certs["server"].cert_path))
    with pytest.raises(ClientError):
        run_coroutine(asyncio.wait_for(send(cluster.namesrv_addr, anonymous, [b"anon"], "tls-anon"), 30))
    line = cluster.broker().wait_for_line(r"TLS handshake with 127\.0\.0\.1:\d+ failed: .*")
    assert "CERTIFICATE" in line[0].upper()


def test_the_cli_sends_with_tls(cluster: Cluster, certs, tmp_path: Path):
    client, server = certs["client"], certs["server"]
    out = run_skiff(["send", "-n", cluster.namesrv_addr, "--tls-trust", str(server.cert_path), "--tls-cert",
                     str(client.cert_path), "--tls-key", str(client.key_path), "-t", TOPIC, "from-cli"],
                    cwd=tmp_path)
    assert out.returncode == 0 and "SEND_OK" in out.stdout, out.stdout
    plain = run_skiff(["send", "-n", cluster.namesrv_addr, "-t", TOPIC, "x"], cwd=tmp_path)
    assert plain.returncode != 0 and "accepts TLS connections only" in plain.stdout, plain.stdout
