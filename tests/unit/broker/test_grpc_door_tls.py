"""TLS on Skiff's own gRPC door (skiff.broker.grpc.tls.door_tls through SniffingListener), called
by grpcio's clients: ALPN h2 is offered (grpcio refuses a server that does not pick it),
permissive serves TLS and plaintext clients on one port, enforcing refuses plaintext, a renewed
certificate is served to new connections, and disabled serves no TLS at all."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import grpc

from skiff.broker.grpc.tls import H2Tls, door_tls
from skiff.testing.waits import eventually
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.grpc_server import GrpcServer, Kind, Method
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import TlsMode, TlsSettings

SERVICE = "skiff.test.Echo"
METHOD = f"/{SERVICE}/Echo"
RELOAD_S = 0.2


async def _echo(request: bytes, context: Any) -> bytes:
    return b"echo:" + request


def _server(tls: H2Tls) -> GrpcServer:
    return GrpcServer("127.0.0.1", 0, SERVICE, {"Echo": Method(Kind.UNARY, bytes, bytes, _echo)}, 1024, tls)


async def _call(port: int, trust: CertificatePair | None) -> str:
    """The answer, or the status code's name when the call fails; ``trust`` None: plaintext."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    if trust is None:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options)
    else:
        credentials = grpc.ssl_channel_credentials(root_certificates=trust.cert_path.read_bytes())
        channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)
    async with channel:
        try:
            return (await channel.unary_unary(METHOD)(b"hi", timeout=5)).decode()
        except grpc.aio.AioRpcError as exc:
            return exc.code().name


def _settings(mode: TlsMode, pair: CertificatePair) -> TlsSettings:
    return TlsSettings(tls_server_mode=mode, tls_server_cert_path=str(pair.cert_path),
                       tls_server_key_path=str(pair.key_path))


def test_permissive_serves_tls_and_plaintext_on_one_port(tmp_path: Path):
    pair = write_self_signed(tmp_path, "server")

    async def main() -> None:
        server = _server(H2Tls(_settings(TlsMode.PERMISSIVE, pair)))
        await server.start()
        try:
            assert await _call(server.port, pair) == "echo:hi"
            assert await _call(server.port, None) == "echo:hi"
        finally:
            await server.stop(0)

    run_coroutine(main())


def test_enforcing_refuses_plaintext_and_serves_a_renewed_certificate(tmp_path: Path):
    old, new = write_self_signed(tmp_path / "old", "server"), write_self_signed(tmp_path / "new", "server")
    live = CertificatePair(tmp_path / "live.crt", tmp_path / "live.key")
    for src, dst in ((old.cert_path, live.cert_path), (old.key_path, live.key_path)):
        shutil.copy(src, dst)

    async def main() -> None:
        server = _server(H2Tls(_settings(TlsMode.ENFORCING, live), RELOAD_S))
        await server.start()
        try:
            assert await _call(server.port, None) == "UNAVAILABLE"
            assert (await _call(server.port, old), await _call(server.port, new)) == ("echo:hi", "UNAVAILABLE")
            shutil.copy(new.key_path, live.key_path)
            shutil.copy(new.cert_path, live.cert_path)

            async def renewed() -> bool:
                return await _call(server.port, new) == "echo:hi"

            await eventually(renewed, 10, "the renewed certificate served")
            assert await _call(server.port, old) == "UNAVAILABLE"
        finally:
            await server.stop(0)

    run_coroutine(main())


def test_disabled_serves_no_tls(tmp_path: Path):
    assert door_tls(_settings(TlsMode.DISABLED, write_self_signed(tmp_path))) is None
