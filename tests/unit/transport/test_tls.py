"""TLS on the remoting transport: the three modes of tls.server.mode on one port, mutual TLS,
a client that verifies the server, and the config errors that name their key."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from skiff.common.errors import ConfigError
from skiff.protocol.codes import ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.transport import ConnectFailed, ConnectionClosed, RemotingClient, RemotingServer
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.connection import Connection
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import (
    ENFORCING_REMARK,
    ClientAuth,
    TlsClientConfig,
    TlsMode,
    TlsSettings,
    server_context,
    server_pem,
)

from ._support import connect, raw_call, wait_peer_close

ECHO = 1


def echo(conn: Connection, req: RemotingCommand) -> RemotingCommand:
    """Answers with how the server sees the connection, so a test sees TLS from both ends."""
    return req.response(ext_fields={"tls": conn.tls_version or "plaintext"}, body=req.body)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertificatePair]:
    d = tmp_path_factory.mktemp("certs")
    return {name: write_self_signed(d, name) for name in ("server", "client", "stranger")}


def settings(certs: dict[str, CertificatePair], mode: TlsMode, client_auth: ClientAuth = ClientAuth.NONE) -> TlsSettings:
    s = certs["server"]
    return TlsSettings(tls_server_mode=mode, tls_server_cert_path=str(s.cert_path), tls_server_key_path=str(s.key_path),
                       tls_server_need_client_auth=client_auth,
                       tls_server_trust_cert_path=str(certs["client"].cert_path) if client_auth.value else "")


async def call(client: RemotingClient, addr: str, body: bytes = b"hi") -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(ECHO, body=body), 3000)


async def with_server(tls: TlsSettings, work) -> None:  # type: ignore[no-untyped-def]
    server = RemotingServer("127.0.0.1", 0, {ECHO: echo}, tls=tls.server_tls())
    await server.start()
    try:
        await work(server, f"127.0.0.1:{server.port}")
    finally:
        await server.stop(0.5)


async def using(client: RemotingClient, addr: str) -> RemotingCommand:
    try:
        return await call(client, addr)
    finally:
        await client.close()


def test_enforcing_serves_tls_and_refuses_plaintext_with_the_reason(certs, caplog):
    async def work(server: RemotingServer, addr: str) -> None:
        resp = await using(RemotingClient(tls=TlsClientConfig()), addr)
        assert (resp.code, resp.body, resp.ext("tls")) == (ResponseCode.SUCCESS, b"hi", "TLSv1.3")

        refused = await using(RemotingClient(), addr)  # a plaintext client gets an answer saying why
        assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, ENFORCING_REMARK)

        again = await using(RemotingClient(tls=TlsClientConfig()), addr)  # and the server goes on serving
        assert again.code == ResponseCode.SUCCESS

    with caplog.at_level(logging.WARNING, logger="skiff.transport.tls"):
        run_coroutine(with_server(settings(certs, TlsMode.ENFORCING), work))
    assert any("refused a plaintext connection from 127.0.0.1:" in r.getMessage() for r in caplog.records)


def test_enforcing_closes_a_plaintext_peer_that_sends_no_frame(certs):
    async def work(server: RemotingServer, addr: str) -> None:
        import asyncio

        def raw() -> tuple[RemotingCommand, bytes]:
            with connect(server.port) as sock:
                answer = raw_call(sock, RemotingCommand.request(ECHO, body=b"x"))
            with connect(server.port) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not a remoting frame: closed without an answer
                return answer, wait_peer_close(sock)

        answer, junk_reply = await asyncio.to_thread(raw)
        assert answer.code == ResponseCode.NO_PERMISSION and junk_reply == b""

    run_coroutine(with_server(settings(certs, TlsMode.ENFORCING), work))


def test_permissive_serves_tls_and_plaintext_on_one_port(certs):
    async def work(server: RemotingServer, addr: str) -> None:
        tls_client, plain_client = RemotingClient(tls=TlsClientConfig()), RemotingClient()
        try:
            for i in range(3):  # both kinds at once, each on its own connection
                a, b = await call(tls_client, addr, b"t%d" % i), await call(plain_client, addr, b"p%d" % i)
                assert (a.ext("tls"), a.body, b.ext("tls"), b.body) == ("TLSv1.3", b"t%d" % i, "plaintext", b"p%d" % i)
            assert sorted(c.tls_version or "plaintext" for c in server.connections) == ["TLSv1.3", "plaintext"]
        finally:
            await tls_client.close()
            await plain_client.close()

    run_coroutine(with_server(settings(certs, TlsMode.PERMISSIVE), work))


def test_a_tls_client_against_a_plaintext_server_fails_to_connect(certs, caplog):
    async def work(server: RemotingServer, addr: str) -> None:
        with pytest.raises(ConnectFailed, match=r"TLS handshake failed: .* \(does the server serve TLS"):
            await using(RemotingClient(tls=TlsClientConfig()), addr)
        assert (await using(RemotingClient(), addr)).ext("tls") == "plaintext"

    with caplog.at_level(logging.WARNING, logger="skiff.transport.connection"):
        run_coroutine(with_server(TlsSettings(), work))
    assert any("malformed frame" in r.getMessage() and "a TLS handshake: this port serves plaintext" in r.getMessage()
               for r in caplog.records)


def test_mutual_tls_requires_a_trusted_client_certificate(certs, caplog):
    client, stranger = certs["client"], certs["stranger"]

    async def work(server: RemotingServer, addr: str) -> None:
        ok = await using(RemotingClient(tls=TlsClientConfig(str(client.cert_path), str(client.key_path))), addr)
        assert (ok.code, ok.ext("tls")) == (ResponseCode.SUCCESS, "TLSv1.3")
        for tls in (TlsClientConfig(), TlsClientConfig(str(stranger.cert_path), str(stranger.key_path))):
            # TLS 1.3: the client's side of the handshake ends before the server judges its
            # certificate, so the refusal may arrive as the first request's closed connection
            with pytest.raises((ConnectFailed, ConnectionClosed)):
                await using(RemotingClient(tls=tls), addr)
        assert not server.connections or all(c.tls_version for c in server.connections)

    with caplog.at_level(logging.WARNING, logger="skiff.transport.tls"):
        run_coroutine(with_server(settings(certs, TlsMode.ENFORCING, ClientAuth.REQUIRE), work))
    failures = [r.getMessage() for r in caplog.records if "TLS handshake with 127.0.0.1:" in r.getMessage()]
    assert len(failures) == 2, failures
    assert any("CERTIFICATE" in f.upper() for f in failures)


def test_optional_client_auth_admits_a_client_without_a_certificate(certs):
    client = certs["client"]

    async def work(server: RemotingServer, addr: str) -> None:
        assert (await using(RemotingClient(tls=TlsClientConfig()), addr)).code == ResponseCode.SUCCESS
        with_cert = TlsClientConfig(str(client.cert_path), str(client.key_path))
        assert (await using(RemotingClient(tls=with_cert), addr)).code == ResponseCode.SUCCESS

    run_coroutine(with_server(settings(certs, TlsMode.ENFORCING, ClientAuth.OPTIONAL), work))


def test_a_verifying_client_trusts_only_its_trust_file(certs):
    server_cert, stranger = str(certs["server"].cert_path), str(certs["stranger"].cert_path)

    async def work(server: RemotingServer, addr: str) -> None:
        trusted = TlsClientConfig(auth_server=True, trust_cert_path=server_cert)
        assert (await using(RemotingClient(tls=trusted), addr)).code == ResponseCode.SUCCESS
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await using(RemotingClient(tls=TlsClientConfig(auth_server=True, trust_cert_path=stranger)), addr)

    run_coroutine(with_server(settings(certs, TlsMode.ENFORCING), work))


def test_config_errors_name_the_key(certs, tmp_path: Path):
    with pytest.raises(ConfigError, match="tls.server.certPath is needed"):
        TlsSettings(tls_server_mode=TlsMode.ENFORCING).validate_tls()
    with pytest.raises(ConfigError, match="tls.server.trustCertPath is needed"):
        TlsSettings(tls_server_need_client_auth=ClientAuth.REQUIRE).validate_tls()
    missing = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(tmp_path / "nope.crt"),
                          tls_server_key_path=str(tmp_path / "nope.key"))
    with pytest.raises(ConfigError, match="does not exist"):
        missing.server_tls()
    swapped = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(certs["server"].key_path),
                          tls_server_key_path=str(certs["server"].cert_path))
    with pytest.raises(ConfigError, match="not a PEM certificate and its private key"):
        swapped.server_tls()


def test_an_encrypted_key_with_its_password(tmp_path: Path):
    pair = write_self_signed(tmp_path, "locked", key_password="s3cret")
    assert b"ENCRYPTED" in pair.key_path.read_bytes() and pair.key_path.stat().st_mode & 0o077 == 0
    good = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(pair.cert_path),
                       tls_server_key_path=str(pair.key_path), tls_server_key_password="s3cret")
    assert isinstance(server_context(good), ssl.SSLContext)
    chain, key, trust = server_pem(good)  # what the gRPC door is given: the key decrypted
    assert chain == pair.cert_path.read_bytes() and b"BEGIN PRIVATE KEY" in key and trust is None
    with pytest.raises(ConfigError, match="tls.server.keyPassword"):
        TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(pair.cert_path),
                    tls_server_key_path=str(pair.key_path), tls_server_key_password="wrong").server_tls()


def test_a_connection_that_says_nothing_is_closed_after_the_sniff_timeout(certs, monkeypatch, caplog):
    import asyncio

    from skiff.transport import tls

    monkeypatch.setattr(tls, "TLS_SNIFF_TIMEOUT_S", 0.5)  # the TLS client below must beat it: not less

    async def work(server: RemotingServer, addr: str) -> None:
        def silent() -> bytes:
            with connect(server.port) as sock:  # sends nothing: the server cannot tell TLS from plaintext
                return wait_peer_close(sock)

        assert await asyncio.to_thread(silent) == b""
        assert (await using(RemotingClient(tls=TlsClientConfig()), addr)).code == ResponseCode.SUCCESS

    with caplog.at_level(logging.INFO, logger="skiff.transport.tls"):
        run_coroutine(with_server(settings(certs, TlsMode.PERMISSIVE), work))
    assert "before it said anything: nothing within" in caplog.text


def test_a_tls_port_in_use_is_a_listen_error(certs):
    from skiff.transport import ListenError

    async def work(server: RemotingServer, addr: str) -> None:
        second = RemotingServer("127.0.0.1", server.port, {ECHO: echo}, tls=settings(certs, TlsMode.ENFORCING).server_tls())
        with pytest.raises(ListenError, match="address already in use"):
            await second.start()

    run_coroutine(with_server(settings(certs, TlsMode.ENFORCING), work))


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path, caplog):
    import shutil

    from skiff.testing.waits import eventually
    from skiff.transport.tls import ServerTls

    old, new = write_self_signed(tmp_path / "old", "server"), write_self_signed(tmp_path / "new", "server")
    live = CertificatePair(tmp_path / "live.crt", tmp_path / "live.key")
    shutil.copy(old.cert_path, live.cert_path)
    shutil.copy(old.key_path, live.key_path)
    settings = TlsSettings(tls_server_mode=TlsMode.ENFORCING, tls_server_cert_path=str(live.cert_path),
                           tls_server_key_path=str(live.key_path))

    def trusting(pair: CertificatePair) -> RemotingClient:
        return RemotingClient(tls=TlsClientConfig(auth_server=True, trust_cert_path=str(pair.cert_path)))

    async def accepts(pair: CertificatePair, addr: str) -> bool:
        try:
            return (await using(trusting(pair), addr)).code == ResponseCode.SUCCESS
        except ConnectFailed:
            return False

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, {ECHO: echo}, tls=ServerTls(settings, check_interval_s=0.05))
        await server.start()
        addr = f"127.0.0.1:{server.port}"
        try:
            assert await accepts(old, addr) and not await accepts(new, addr)
            live.cert_path.write_text("half-written")  # unusable: logged, the old pair is still served
            await eventually(lambda: "cannot be used" in caplog.text, 5, "the unusable files logged")
            assert await accepts(old, addr)
            shutil.copy(new.key_path, live.key_path)
            shutil.copy(new.cert_path, live.cert_path)
            await eventually(lambda: accepts(new, addr), 5, "the renewed certificate served")
            assert not await accepts(old, addr)
        finally:
            await server.stop(0.5)

    with caplog.at_level(logging.INFO, logger="skiff.transport.tls"):
        run_coroutine(main())
    assert "TLS certificate reloaded from" in caplog.text


def test_tls_config_file_as_rocketmq_reads_it(certs, tmp_path: Path):
    from skiff.common.config import build_config
    from skiff.namesrv import NamesrvConfig

    server, client = certs["server"], certs["client"]
    conf = tmp_path / "tls.properties"
    conf.write_text(f"tls.server.certPath={server.cert_path}\ntls.server.keyPath={server.key_path}\n"
                    f"tls.server.need.client.auth=require\ntls.server.trustCertPath={client.cert_path}\n")
    ns = build_config(NamesrvConfig, {"tls.server.mode": "enforcing", "tls.config.file": str(conf),
                                      "tls.server.need.client.auth": "optional"})
    # the file's values win over the config's, as RocketMQ's TlsHelper reads it
    assert (ns.tls_server_cert_path, ns.tls_server_need_client_auth) == (str(server.cert_path), ClientAuth.REQUIRE)
    assert ns.server_tls() is not None

    for text, why in (("tls.server.mode=permissive\n", "tls.server.mode is not read from this file"),
                      ("tls.server.colour=blue\n", "unknown key 'tls.server.colour'")):
        conf.write_text(text)
        with pytest.raises(ConfigError, match=why):
            build_config(NamesrvConfig, {"tls.config.file": str(conf)})
    with pytest.raises(ConfigError, match="cannot read config file"):
        build_config(NamesrvConfig, {"tls.config.file": str(tmp_path / "missing.properties")})
