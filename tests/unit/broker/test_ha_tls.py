"""How a slave dials its master's HA port (skiff.broker.ha.tls): when it uses TLS, what it
trusts and shows, and its files reloaded for the next connection."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.master import HAMaster
from skiff.broker.ha.slave import HASlave
from skiff.broker.ha.tls import SlaveTls, dials_tls, slave_tls_config
from skiff.common.config import build_config
from skiff.common.errors import ConfigError
from skiff.testing.waits import eventually
from skiff.transport.certificates import write_self_signed
from tests.unit.broker.test_ha_master import open_store


def config(**keys: str) -> BrokerConfig:
    return build_config(BrokerConfig, {"brokerRole": "SLAVE", "brokerId": "1", **keys}, {})


def serving(pair_dir: Path, mode: str = "enforcing", **keys: str) -> BrokerConfig:
    pair = write_self_signed(pair_dir, "broker")
    return config(**{"tls.server.mode": mode, "tls.server.certPath": str(pair.cert_path),
                     "tls.server.keyPath": str(pair.key_path), **keys})


def test_a_slave_dials_with_tls_when_it_dials_with_tls_or_serves_tls_only(tmp_path: Path) -> None:
    assert not dials_tls(config())
    assert not dials_tls(serving(tmp_path, "permissive"))
    assert dials_tls(serving(tmp_path, "permissive", **{"tls.enable": "true"}))
    assert dials_tls(serving(tmp_path, "enforcing"))
    assert SlaveTls(config()).context() is None


def test_it_verifies_against_its_trust_else_its_own_chain_and_shows_its_client_else_server_pair(
        tmp_path: Path) -> None:
    own = serving(tmp_path)
    chosen = slave_tls_config(own)
    assert chosen.auth_server  # whatever tls.client.authServer says (false here)
    assert (chosen.trust_cert_path, chosen.cert_path) == (own.tls_server_cert_path, own.tls_server_cert_path)
    other = write_self_signed(tmp_path / "other", "client")
    keyed = serving(tmp_path, **{"tls.client.trustCertPath": str(other.cert_path),
                                 "tls.client.certPath": str(other.cert_path),
                                 "tls.client.keyPath": str(other.key_path)})
    chosen = slave_tls_config(keyed)
    assert (chosen.trust_cert_path, chosen.cert_path, chosen.key_path) == (
        str(other.cert_path), str(other.cert_path), str(other.key_path))
    context = SlaveTls(keyed).context()
    assert context is not None and context.verify_mode is ssl.CERT_REQUIRED and not context.check_hostname


def test_a_trust_file_that_cannot_be_read_stops_the_broker_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tls.client.trustCertPath"):
        SlaveTls(serving(tmp_path, **{"tls.client.trustCertPath": str(tmp_path / "missing.crt")}))


def test_changed_files_are_used_for_the_next_connection_and_broken_ones_are_not(tmp_path: Path) -> None:
    settings = serving(tmp_path)
    tls = SlaveTls(settings)
    first = tls.context()
    assert first is not None and tls.context() is first  # unchanged files: the same context
    trust = Path(settings.tls_server_cert_path)
    renewed = write_self_signed(tmp_path / "renewed", "broker")
    shutil.copy(renewed.cert_path, trust)
    shutil.copy(renewed.key_path, settings.tls_server_key_path)
    os.utime(trust, ns=(1, 1))  # a different stamp even within the file system's clock tick
    second = tls.context()
    assert second is not None and second is not first
    trust.write_text("not a certificate")
    assert tls.context() is second  # logged; the previous context stays


def test_a_tls_slave_at_a_plaintext_master_is_told_why_on_both_sides(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """A plaintext HA port closes a connection whose first byte starts a TLS handshake, saying so;
    the slave logs its failed handshake once (its retries every second go to debug)."""
    pair = write_self_signed(tmp_path / "tls", "broker")

    async def main() -> None:
        master_store, slave_store = open_store(tmp_path / "master"), open_store(tmp_path / "slave")
        master = HAMaster(BrokerConfig(), master_store, "127.0.0.1", 0)
        await master.start()
        slave = HASlave(config(**{"haMasterAddress": f"127.0.0.1:{master.port}", "tls.server.mode": "enforcing",
                                  "tls.server.certPath": str(pair.cert_path),
                                  "tls.server.keyPath": str(pair.key_path)}), slave_store)
        slave.start()
        try:
            await eventually(lambda: slave.last_drop.startswith("TLS handshake failed"), 10, "the handshake failing")
            await eventually(lambda: caplog.text.count("a TLS handshake: this HA port serves plaintext") >= 2, 10,
                             "a second attempt refused")
            assert not slave.connected and slave_store.max_physical_offset == 0
        finally:
            await slave.stop()
            await master.stop()
            master_store.shutdown()
            slave_store.shutdown()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    assert caplog.text.count("cannot connect to the master's HA port") == 1, caplog.text
