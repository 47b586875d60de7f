"""TLS on the gRPC door: server credentials from the broker's ``tls.server.*`` files.

grpcio serves one port either with TLS or without and cannot look at a connection's first
bytes first, so the gRPC door cannot be ``permissive`` the way the remoting door is: it
serves TLS when ``tls.server.mode=enforcing`` and plaintext otherwise (permissive keeps the
plaintext 5.x clients working while remoting clients move to TLS). See docs/tls.md.
"""

from __future__ import annotations

import logging

import grpc

from skiff.transport.tls import ClientAuth, TlsMode, TlsSettings, server_pem

log = logging.getLogger(__name__)


def grpc_credentials(settings: TlsSettings) -> grpc.ServerCredentials | None:
    """The gRPC port's credentials; None serves it plaintext."""
    if settings.tls_server_mode is TlsMode.PERMISSIVE:
        log.info("the gRPC endpoint serves plaintext: grpcio cannot serve TLS and plaintext on one port "
                 "(tls.server.mode=permissive; enforcing serves it over TLS)")
    if settings.tls_server_mode is not TlsMode.ENFORCING:
        return None
    chain, key, trust = server_pem(settings)
    return grpc.ssl_server_credentials([(key, chain)], root_certificates=trust,
                                       require_client_auth=settings.tls_server_need_client_auth is ClientAuth.REQUIRE)
