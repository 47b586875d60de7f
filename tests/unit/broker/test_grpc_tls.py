"""The gRPC door's TLS credentials (skiff/broker/grpc/tls.py) on a real grpcio server: a client
that trusts the certificate is served, one that does not is refused, a renewed certificate is
served to new connections without a restart, and only enforcing turns TLS on."""

from __future__ import annotations

import shutil
from pathlib import Path

import grpc
import pytest

from skiff.broker.grpc.tls import grpc_credentials
from skiff.testing.waits import eventually
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import TlsMode, TlsSettings

METHOD = "/skiff.test.Echo/Echo"


def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b"echo:" + request


async def _call(port: int, trust: CertificatePair) -> str:
    """The answer, or the status code's name when the call fails."""
    credentials = grpc.ssl_channel_credentials(root_certificates=trust.cert_path.read_bytes())
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials,
                                       options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        try:
            return (await channel.unary_unary(METHOD)(b"hi", timeout=5)).decode()
        except grpc.aio.AioRpcError as exc:
            return exc.code().name


def test_tls_on_the_grpc_port_and_a_renewed_certificate(tmp_path: Path):
    old, new = write_self_signed(tmp_path / "old", "server"), write_self_signed(tmp_path / "new", "server")
    live = CertificatePair(tmp_path / "live.crt", tmp_path / "live.key")
    for src, dst in ((old.cert_path, live.cert_path), (old.key_path, live.key_path)):
        shutil.copy(src, dst)
    settings = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(live.cert_path),
                           tls_server_key_path=str(live.key_path))

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
            "skiff.test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(_echo)})])
        credentials = grpc_credentials(settings)
        assert credentials is not None
        port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        try:
            assert (await _call(port, old), await _call(port, new)) == ("echo:hi", "UNAVAILABLE")
            shutil.copy(new.key_path, live.key_path)
            shutil.copy(new.cert_path, live.cert_path)
            await eventually(lambda: _call_is(port, new, "echo:hi"), 10, "the renewed certificate served")
            assert await _call(port, old) == "UNAVAILABLE"
        finally:
            await server.stop(0)

    run_coroutine(main())


async def _call_is(port: int, trust: CertificatePair, answer: str) -> bool:
    return await _call(port, trust) == answer


@pytest.mark.parametrize("mode", [TlsMode.DISABLED, TlsMode.PERMISSIVE])
def test_only_enforcing_serves_grpc_over_tls(mode: TlsMode, tmp_path: Path):
    pair = write_self_signed(tmp_path)
    settings = TlsSettings(tls_server_mode=mode, tls_server_cert_path=str(pair.cert_path),
                           tls_server_key_path=str(pair.key_path))
    assert grpc_credentials(settings) is None
