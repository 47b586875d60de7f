"""`skiff up --tls` with real clients: the official RocketMQ 5.x Python client (5.1.2,
``tls_enable=True``) sends and receives over the gRPC door's TLS, and Skiff's own client over the
remoting door's; both doors refuse plaintext.

The 5.x Python client verifies the server (``grpc.ssl_channel_credentials()``: gRPC's roots and
the host name), so it is pointed at the try-out's self-signed certificate with
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH; without it the client refuses the server.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pytest

from skiff.client import AsyncAdmin, AsyncProducer, ClientConfig, Message, TlsClientConfig
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.processes import SkiffProcess, free_port, start_skiff
from skiff.transport.loop import run_coroutine
from tests.interop.test_grpc_client import rmq5_python

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("grpc-tls")]  # one `skiff up` for the module

SCRIPT = Path(__file__).resolve().parent / "grpc" / "tls_client.py"
TOPIC = "GTls"


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory):
    rmq5_python()
    root = tmp_path_factory.mktemp("up-tls")
    grpc_port = free_port()
    args = ["up", "--tls", "--dir", "data", "--namesrv-port", "0", "--broker-port", "0", "--metrics-port", "0",
            "--namesrv-metrics-port", "0", "--dashboard-port", "0", f"--grpcServerPort={grpc_port}",
            "--mappedFileSizeCommitLog=4194304", "--maxHashSlotNum=1024", "--maxIndexNum=4096"]
    with start_skiff(args, cwd=root) as proc:
        proc.wait_for_line(r"skiff broker listening on ")
        proc.grpc_endpoint = f"127.0.0.1:{grpc_port}"  # type: ignore[attr-defined]
        proc.cert = root / "data" / "tls" / "skiff.crt"  # type: ignore[attr-defined]
        run_coroutine(_create_topic(proc))
        yield proc


def _tls(proc: SkiffProcess) -> TlsClientConfig:
    return TlsClientConfig(auth_server=True, trust_cert_path=str(proc.cert))  # type: ignore[attr-defined]


async def _create_topic(proc: SkiffProcess) -> None:
    # the NameServer is enforcing too: this route came from a broker that registered over TLS
    async with AsyncAdmin(client_config=ClientConfig(proc.addr, "up-tls-admin", tls=_tls(proc))) as admin:
        await admin.create_topic(TOPIC, queue_nums=2)


def run_client(proc: SkiffProcess, tmp_path: Path, *, trust: bool, tls: bool = True, count: int = 5) -> dict:
    spec = {"endpoint": proc.grpc_endpoint, "topic": TOPIC, "group": "G-tls", "count": count,  # type: ignore[attr-defined]
            "tls": tls}
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    env.pop("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", None)
    if trust:
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(proc.cert)  # type: ignore[attr-defined]
    done = subprocess.run([rmq5_python(), str(SCRIPT), json.dumps(spec)], capture_output=True, text=True,
                          timeout=90, env=env, cwd=tmp_path)
    assert done.returncode == 0, f"client failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_5x_python_client_sends_and_receives_over_tls(up: SkiffProcess, tmp_path: Path):
    r = run_client(up, tmp_path, trust=True)
    assert sorted(m["body"] for m in r["got"]) == [f"tls-{i}" for i in range(5)]
    assert sorted(m["id"] for m in r["got"]) == sorted(r["sent"])
    assert f"listening on {up.grpc_endpoint} over TLS" in up.output  # type: ignore[attr-defined]


def test_the_5x_python_client_refuses_an_untrusted_certificate(up: SkiffProcess, tmp_path: Path):
    r = run_client(up, tmp_path, trust=False, count=1)
    assert "send_error" in r and r["sent"] == [], r
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").rglob("*") if p.is_file())
    assert "CERTIFICATE_VERIFY_FAILED" in logs.upper().replace(" ", "_"), logs[-2000:]


def test_the_5x_python_client_in_plaintext_is_refused(up: SkiffProcess, tmp_path: Path):
    r = run_client(up, tmp_path, trust=True, tls=False, count=1)
    assert "send_error" in r and r["sent"] == [], r


def test_the_grpc_door_refuses_plaintext(up: SkiffProcess):
    async def plaintext_call() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(up.grpc_endpoint) as channel:  # type: ignore[attr-defined]
            call = channel.unary_unary("/apache.rocketmq.v2.MessagingService/QueryRoute",
                                       request_serializer=rpc.QueryRouteRequest.SerializeToString,
                                       response_deserializer=rpc.QueryRouteResponse.FromString)
            try:
                await call(rpc.QueryRouteRequest(), timeout=5)
            except grpc.aio.AioRpcError as exc:
                return exc.code()
            raise AssertionError("a plaintext gRPC call was answered by a TLS-only endpoint")

    assert run_coroutine(plaintext_call()) == grpc.StatusCode.UNAVAILABLE


def test_the_dashboard_reads_the_cluster_over_tls(up: SkiffProcess):
    port = up.wait_for_line(r"skiff dashboard listening on 127\.0\.0\.1:(\d+)")[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/cluster", timeout=10) as resp:
        brokers = json.load(resp)["brokers"]
    assert [(b["role"], b["error"]) for b in brokers] == [("MASTER", None)]


def test_our_client_sends_over_the_remoting_door_and_plaintext_is_refused(up: SkiffProcess):
    async def send(tls: TlsClientConfig | None) -> str:
        async with AsyncProducer("up-tls-p", client_config=ClientConfig(up.addr, "up-tls", tls=tls)) as producer:
            return (await producer.send(Message(TOPIC, b"remoting"))).send_status.name

    assert run_coroutine(send(_tls(up))) == "SEND_OK"
    with pytest.raises(Exception, match="accepts TLS connections only"):  # the NameServer refuses it first
        run_coroutine(send(None))
