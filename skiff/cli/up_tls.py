"""`skiff up --tls`: both doors of the try-out served over TLS with a self-signed pair.

The pair is made once in ``<store>/tls/`` (``skiff.crt``, ``skiff.key``) and kept, so a
client that was told to trust it goes on trusting it across restarts. The NameServer and
the broker run ``tls.server.mode=enforcing`` (the gRPC door and the Kafka listener serve TLS
only then), the broker registers with the NameServer over TLS and verifies it, and the dashboard connects with TLS.
With ``--brokers N`` or ``--ha`` every broker serves its doors with the same pair (one
certificate for a client to trust), and `skiff up` talks to them over TLS too.
docs/tls.md shows each client's settings.
"""

from __future__ import annotations

import argparse
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


def try_out_tls(args: argparse.Namespace, store_dir: str) -> tuple[CertificatePair | None, dict[str, str]]:
    """With ``--tls``: the pair (valid for ``--host`` and the address brokers advertise) and the
    ``tls.*`` keys of every server of this `skiff up`; without: (None, {})."""
    if not getattr(args, "tls", False):
        return None, {}
    from skiff.broker.config import default_broker_ip

    pair = up_tls_pair(store_dir, args.host, default_broker_ip(args.host))
    return pair, up_tls_keys(pair)


def tls_note(pair: CertificatePair) -> str:
    """What a client needs to connect: the certificate to trust, in each client's terms."""
    cert = pair.cert_path.resolve()
    return (f"TLS only (tls.server.mode=enforcing), self-signed certificate {cert}: skiff commands take "
            f"--tls --tls-trust {cert}; RocketMQ 5.x clients tls_enable=True with "
            f"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={cert}; Kafka clients security.protocol=SSL with "
            f"ssl.ca.location={cert} (docs/tls.md)")


def log_tls_note(pair: CertificatePair) -> None:
    log.info("%s", tls_note(pair))


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
