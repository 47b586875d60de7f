"""TLS on the HA port: how a slave dials its master's replication stream (docs/tls.md, "The
HA port").

The stream carries every message a broker stores, so under TLS it is encrypted as the
client doors are. The master's side is the remoting door's `SniffingListener` on the HA
port, by the broker's ``tls.server.mode`` (`HAMaster`). The slave's side is here: it dials
with TLS when the broker dials with TLS (``tls.enable``, which its metadata sync with the
same master follows) or serves TLS only (``enforcing``: a group shares its mode, so its master
refuses plaintext).

A slave appends what the master sends as its own data, so it always verifies the master's
certificate, whatever ``tls.client.authServer`` says: against ``tls.client.trustCertPath``,
else the broker's own chain (``tls.server.certPath``: brokers sharing one certificate or one
CA trust each other without more keys, as `skiff.broker.grpc.tls.peer_credentials` does for
broker-to-broker gRPC calls), else the system's roots. The chain is checked, not the host
name (HA addresses come from the NameServer or ``brokerIP2``, which certificates rarely
list), as RocketMQ's Netty client checks. It shows ``tls.client.certPath``, else its server
certificate, so a master that requires client certificates takes a slave its trust covers.
"""

from __future__ import annotations

import logging
import ssl

from skiff.common.errors import ConfigError
from skiff.transport.tls import TlsClientConfig, TlsMode, TlsSettings, WatchedFiles, client_context

log = logging.getLogger(__name__)


def ha_port_tls_note(settings: TlsSettings) -> str:
    """What the HA port's start line adds about TLS ("" when it serves plaintext)."""
    if settings.tls_server_mode is TlsMode.ENFORCING:
        return " (TLS only, tls.server.mode=enforcing)"
    if settings.tls_server_mode is TlsMode.PERMISSIVE:
        return " (TLS and plaintext, tls.server.mode=permissive)"
    return ""


def dials_tls(settings: TlsSettings) -> bool:
    """Whether a slave dials its master's HA port with TLS (see the module's docstring)."""
    return settings.tls_enable or settings.tls_server_mode is TlsMode.ENFORCING


def slave_tls_config(settings: TlsSettings) -> TlsClientConfig:
    """The certificate a slave shows and the trust it verifies its master against."""
    cert, key, password = (settings.tls_client_cert_path, settings.tls_client_key_path,
                           settings.tls_client_key_password)
    if not cert and settings.tls_server_mode is not TlsMode.DISABLED:
        cert, key, password = (settings.tls_server_cert_path, settings.tls_server_key_path,
                               settings.tls_server_key_password)
    trust = settings.tls_client_trust_cert_path or settings.tls_server_cert_path
    return TlsClientConfig(cert, key, password, auth_server=True, trust_cert_path=trust)


class SlaveTls:
    """A slave's context for dialling the HA port: None for plaintext. Made at start (a file
    that cannot be used stops the broker, naming its key) and made again for the next
    connection when its files changed (a renewed certificate or trust is used without a
    restart); files that changed but cannot be used are logged and the previous context kept."""

    def __init__(self, settings: TlsSettings) -> None:
        self.config = slave_tls_config(settings) if dials_tls(settings) else None
        self._context = client_context(self.config) if self.config is not None else None
        paths = [self.config.cert_path, self.config.key_path, self.config.trust_cert_path] if self.config else []
        self._files = WatchedFiles(settings, paths)

    def context(self) -> ssl.SSLContext | None:
        if self.config is None or not self._files.changed():
            return self._context
        try:
            self._context = client_context(self.config)
        except ConfigError as exc:
            log.error("the HA connection's TLS files changed but cannot be used; the previous ones are still "
                      "used: %s", exc)
        else:
            log.info("HA connection: TLS certificate and trust reloaded")
        return self._context
