"""TLS on the gRPC door, from the broker's ``tls.server.*`` files.

Skiff's own door (``grpcServerEngine=skiff``, the default) serves TLS as the remoting door
does, through `SniffingListener`: ``permissive`` takes TLS and plaintext 5.x clients on one
port (told apart by their first byte: an HTTP/2 preface starts with "P", a TLS handshake with
0x16), ``enforcing`` TLS only; the context offers ALPN "h2", which gRPC clients require
(`door_tls`). grpcio's server (``grpcServerEngine=grpcio``) serves one port either with TLS or
without and cannot look at a connection's first bytes, so there ``permissive`` serves plaintext
and ``enforcing`` TLS (`grpc_credentials`). Either way a renewed certificate is served to new
connections without a restart, as on the remoting door. See docs/tls.md.

Brokers call each other's gRPC door too (lite topics across brokers,
skiff.broker.grpc.lite_peers): under ``enforcing`` they do so over TLS (`peer_credentials`).
"""

from __future__ import annotations

import logging

import grpc

from pathlib import Path

from skiff.common.errors import ConfigError
from skiff.transport.tls import CERT_CHECK_INTERVAL_S, ClientAuth, ServerTls, TlsMode, TlsSettings, WatchedFiles, server_pem

log = logging.getLogger(__name__)


ALPN = ["h2"]
"""What the door offers in the TLS handshake: gRPC clients refuse a server that does not pick h2."""


class H2Tls(ServerTls):
    """The broker's `ServerTls` with ALPN "h2" on its context, the reloaded one included."""

    def __init__(self, settings: TlsSettings, check_interval_s: float = CERT_CHECK_INTERVAL_S) -> None:
        super().__init__(settings, check_interval_s)
        self.context.set_alpn_protocols(ALPN)

    def reload_if_changed(self) -> None:
        super().reload_if_changed()
        self.context.set_alpn_protocols(ALPN)  # a no-op when the context is the same one


def door_tls(settings: TlsSettings) -> ServerTls | None:
    """What Skiff's own gRPC door serves over TLS (None: plaintext only, tls.server.mode=disabled)."""
    if settings.tls_server_mode is TlsMode.DISABLED:
        return None
    return H2Tls(settings)


def grpc_credentials(settings: TlsSettings) -> grpc.ServerCredentials | None:
    """The gRPC port's credentials; None serves it plaintext. grpcio asks ``fetch`` at every new
    connection, which looks at the files' stamps and reads them only when they changed."""
    if settings.tls_server_mode is TlsMode.PERMISSIVE:
        log.info("the gRPC endpoint serves plaintext: grpcio cannot serve TLS and plaintext on one port "
                 "(tls.server.mode=permissive; enforcing serves it over TLS)")
    if settings.tls_server_mode is not TlsMode.ENFORCING:
        return None
    files = WatchedFiles(settings)

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        if not files.changed():
            return None
        try:
            configuration = _configuration(settings)
        except ConfigError as exc:
            log.error("the TLS files changed but cannot be used; the gRPC endpoint keeps the previous "
                      "certificate: %s", exc)
            return None
        log.info("gRPC endpoint: TLS certificate reloaded from %s", settings.tls_server_cert_path)
        return configuration

    return grpc.dynamic_ssl_server_credentials(
        _configuration(settings), fetch,
        require_client_authentication=settings.tls_server_need_client_auth is ClientAuth.REQUIRE)


def _configuration(settings: TlsSettings) -> grpc.ServerCertificateConfiguration:
    chain, key, trust = server_pem(settings)
    return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=trust)


def peer_credentials(settings: TlsSettings) -> grpc.ChannelCredentials | None:
    """How this broker calls another broker's gRPC door: over TLS when its own door is
    ``enforcing`` (a cluster's brokers share the mode), else plaintext (None). The peer's
    certificate must chain to ``tls.client.trustCertPath`` (the trust this broker dials with),
    or, when that is unset, to this broker's own certificate chain (brokers sharing one
    certificate or one CA trust each other without more keys); grpcio also checks that it names
    the address the peer is dialled at, as the 5.x clients do. The broker shows its own
    certificate, so a peer that requires client certificates (``tls.server.need.client.auth``)
    takes it when its trust holds that chain."""
    if settings.tls_server_mode is not TlsMode.ENFORCING:
        return None
    chain, key, _ = server_pem(settings)
    trust = chain
    if settings.tls_client_trust_cert_path:
        try:
            trust = Path(settings.tls_client_trust_cert_path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"tls.client.trustCertPath: cannot read {settings.tls_client_trust_cert_path}: "
                              f"{exc.strerror}") from None
    return grpc.ssl_channel_credentials(root_certificates=trust, private_key=key, certificate_chain=chain)
