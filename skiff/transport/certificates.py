"""Self-signed certificates, for trying TLS out (`skiff up --tls`) and for tests.

A self-signed certificate is its own trust anchor: a client that verifies trusts it by
being given the certificate file itself (``tls.client.trustCertPath``, ``--tls-trust``, or
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` for the 5.x clients). It names the addresses clients
dial (``localhost``, loopback, the advertised IP) because gRPC clients check the host name.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365
"""A try-out pair is good for a year; a real deployment brings its own certificates."""

DEFAULT_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class CertificatePair:
    cert_path: Path
    key_path: Path


def write_self_signed(directory: str | Path, name: str = "skiff", hosts: Iterable[str] = DEFAULT_NAMES,
                      key_password: str = "") -> CertificatePair:
    """Write ``<name>.crt`` and ``<name>.key`` (PEM; the key PKCS#8, readable by its owner only,
    encrypted when ``key_password`` is given) into ``directory``, valid for ``hosts`` (DNS
    names or IP addresses); an existing pair is kept, so clients that trust it go on trusting."""
    directory = Path(directory)
    pair = CertificatePair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert_path.exists() and pair.key_path.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(key, name, list(dict.fromkeys(hosts)))
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(key_password.encode()) if key_password
        else serialization.NoEncryption())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    fd = os.open(pair.key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key_pem)
    pair.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def _certificate(key: ec.EllipticCurvePrivateKey, name: str, hosts: list[str]) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # a peer whose clock is a little behind
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(key, hashes.SHA256())
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
