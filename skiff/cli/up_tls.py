"""`skiff up --tls`: both doors of the try-out served over TLS with a self-signed pair.

The pair is made once in ``<store>/tls/`` (``skiff.crt``, ``skiff.key``) and kept, so a
client that was told to trust it goes on trusting it across restarts. The NameServer and
the broker run ``tls.server.mode=enforcing`` (the gRPC door and the Kafka listener serve TLS
only then), the broker registers with the NameServer over TLS and verifies it, and the dashboard connects with TLS.
docs/tls.md shows each client's settings.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skiff.transport.certificates import CertificatePair

log = logging.getLogger("skiff.broker")

TLS_DIR = "tls"


def up_tls_pair(store_dir: str, *hosts: str) -> CertificatePair:
    """The try-out's pair, valid for loopback and ``hosts`` (the listen and advertised addresses)."""
    from skiff.transport.certificates import DEFAULT_NAMES, write_self_signed  # cryptography: only with --tls

    names = [*DEFAULT_NAMES, *(h for h in hosts if h and not _unspecified(h))]
    return write_self_signed(Path(store_dir) / TLS_DIR, "skiff", names)


def up_tls_keys(pair: CertificatePair) -> dict[str, str]:
    """The ``tls.*`` keys of both servers (the NameServer ignores what only a dialling side uses)."""
    cert, key = str(pair.cert_path), str(pair.key_path)
    return {"tls.server.mode": "enforcing", "tls.server.certPath": cert, "tls.server.keyPath": key,
            "tls.enable": "true", "tls.client.authServer": "true", "tls.client.trustCertPath": cert}


def log_tls_note(pair: CertificatePair) -> None:
    cert = pair.cert_path.resolve()
    log.info("TLS only (tls.server.mode=enforcing), self-signed certificate %s: skiff commands take "
             "--tls --tls-trust %s; RocketMQ 5.x clients tls_enable=True with "
             "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=%s; Kafka clients security.protocol=SSL with ssl.ca.location=%s "
             "(docs/tls.md)", cert, cert, cert, cert)


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
