"""The HA replication stream under TLS, with real processes (docs/tls.md, "The HA port").

An enforcing master serves its HA port over TLS only: a slave that dials it with TLS and
trusts its certificate replicates (the CommitLogs byte for byte, pulls from the slave), a
plaintext slave is refused (logged on both sides) and a slave whose trust does not hold the
master's chain fails its handshake; neither gets a byte. A permissive master takes a TLS
slave and a plaintext one on the same port.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.etcd import etcd_binary
from skiff.testing.ha import HAGroup
from skiff.testing.processes import SkiffProcess
from skiff.testing.up_ha import UpHa
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire
from skiff.transport.certificates import CertificatePair, write_self_signed
from skiff.transport.tls import TlsClientConfig

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("ha-tls")]

TOPIC = "HaTls"
TLS_SLAVE, PLAINTEXT_SLAVE, WRONG_TRUST_SLAVE = 1, 2, 3


def server_keys(pair: CertificatePair, mode: str) -> list[str]:
    return [f"--tls.server.mode={mode}", f"--tls.server.certPath={pair.cert_path}",
            f"--tls.server.keyPath={pair.key_path}"]


def dial_keys(pair: CertificatePair, trust: CertificatePair, *, verify_namesrv: bool = True) -> list[str]:
    """The broker dials (the NameServer, its master's remoting and HA ports) with TLS, showing ``pair``."""
    return ["--tls.enable=true", f"--tls.client.certPath={pair.cert_path}", f"--tls.client.keyPath={pair.key_path}",
            f"--tls.client.authServer={str(verify_namesrv).lower()}", f"--tls.client.trustCertPath={trust.cert_path}"]


def client_tls(pair: CertificatePair) -> TlsClientConfig:
    """The test's own connections: show the brokers' certificate (they require one) and verify theirs."""
    return TlsClientConfig(str(pair.cert_path), str(pair.key_path), auth_server=True,
                           trust_cert_path=str(pair.cert_path))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertificatePair]:
    d = tmp_path_factory.mktemp("certs")
    return {name: write_self_signed(d, name) for name in ("broker", "stranger")}



async def send_some(master: BrokerWire, count: int) -> list[bytes]:
    bodies = [f"over TLS {i} ".encode() * 40 for i in range(count)]
    batch = [Message.of(TOPIC, body, keys=f"k{i}") for i, body in enumerate(bodies)]
    resp = await master.send_batch(TOPIC, batch, queue_id=0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return bodies


async def replicated(group: HAGroup, master: BrokerWire, slave_id: int, slave: BrokerWire, bodies: list[bytes]) -> None:
    """The slave holds the master's CommitLog byte for byte and serves its messages."""
    end = await master.max_offset()

    async def caught_up() -> bool:
        return await slave.max_offset() == end
    await eventually(caught_up, 30, f"slave {slave_id} reaching the master's offset {end}")
    assert group.commitlog_bytes(slave_id, 0, end) == group.commitlog_bytes(0, 0, end)

    async def served() -> list[bytes] | None:  # once its metadata sync has brought the topic's config
        return [m.body for m in await slave.pull_messages("G", TOPIC, 0)] or None
    assert await eventually(served, 20, f"slave {slave_id} serving the topic") == bodies


def next_line(proc: SkiffProcess, pattern: str, timeout_s: float = 20.0) -> str:
    """The first line matching ``pattern`` printed from now on."""
    return proc.wait_for_line(pattern, timeout_s, start=len(proc.output.splitlines())).group(0)


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory, certs: dict[str, CertificatePair]) -> Iterator[HAGroup]:
    """An enforcing master that requires client certificates, and three slaves: one dialling with
    TLS, one plaintext, one whose trust is another certificate (it does not verify the NameServer,
    tls.client.authServer=false, to show that the HA connection verifies regardless)."""
    broker, stranger = certs["broker"], certs["stranger"]
    enforcing = [*server_keys(broker, "enforcing"), "--tls.server.need.client.auth=require",
                 f"--tls.server.trustCertPath={broker.cert_path}"]
    with HAGroup(tmp_path_factory.mktemp("ha-enforcing"), slaves=0, namesrv_args=server_keys(broker, "permissive"),
                 master_args=[*enforcing, *dial_keys(broker, broker)]) as group:
        group.start_slave(TLS_SLAVE, *enforcing, *dial_keys(broker, broker))
        group.start_slave(PLAINTEXT_SLAVE)
        group.start_slave(WRONG_TRUST_SLAVE, *enforcing, *dial_keys(broker, stranger, verify_namesrv=False))
        yield group


def test_a_tls_slave_replicates_from_an_enforcing_master(enforcing: HAGroup, certs: dict[str, CertificatePair]) -> None:
    tls = client_tls(certs["broker"])

    async def main() -> None:
        master, slave = BrokerWire(enforcing.master_addr, tls=tls), BrokerWire(enforcing.slave_addr(TLS_SLAVE), tls=tls)
        try:
            bodies = await send_some(master, 50)
            await replicated(enforcing, master, TLS_SLAVE, slave, bodies)
            assert (await master.runtime())["haSlaveCount"] == "1"  # the other two are not connected
        finally:
            await master.close()
            await slave.close()
    asyncio.run(main())
    enforcing.proc(0).wait_for_line(r"HA service listening on \S+ \(TLS only, tls.server.mode=enforcing\)", 1)
    enforcing.proc(0).wait_for_line(r"slave \S+ connected to the HA service over TLS", 1)
    enforcing.proc(TLS_SLAVE).wait_for_line(r"following the master at \S+ over TLS from offset", 1)


def test_a_plaintext_slave_is_refused_by_an_enforcing_master(enforcing: HAGroup,
                                                             certs: dict[str, CertificatePair]) -> None:
    async def main() -> None:
        master = BrokerWire(enforcing.master_addr, tls=client_tls(certs["broker"]))
        slave = BrokerWire(enforcing.slave_addr(PLAINTEXT_SLAVE))
        try:
            await send_some(master, 5)
            # refused again after the master holds data (the slave retries every second)
            next_line(enforcing.proc(0), r"refused a plaintext connection from \S+ to the HA port: "
                                         r"tls.server.mode is enforcing")
            next_line(enforcing.proc(PLAINTEXT_SLAVE), r"stopped following the master at \S+: .* before sending "
                                                       r"anything: if its HA port serves TLS only")
            assert await master.max_offset() > 0
            assert await slave.max_offset() == 0
            assert (await slave.runtime())["haMasterSentOffset"] == "-1"
        finally:
            await master.close()
            await slave.close()
    asyncio.run(main())


def test_a_slave_with_a_wrong_trust_cannot_connect(enforcing: HAGroup, certs: dict[str, CertificatePair]) -> None:
    tls = client_tls(certs["broker"])

    async def main() -> None:
        master = BrokerWire(enforcing.master_addr, tls=tls)
        slave = BrokerWire(enforcing.slave_addr(WRONG_TRUST_SLAVE), tls=tls)
        try:
            await send_some(master, 5)
            next_line(enforcing.proc(0), r"TLS handshake with \S+ to the HA port failed")
            assert await master.max_offset() > 0
            assert await slave.max_offset() == 0
            assert (await slave.runtime())["haConnected"] == "false"
        finally:
            await master.close()
            await slave.close()
    asyncio.run(main())
    # said once (the retries every second go to debug)
    enforcing.proc(WRONG_TRUST_SLAVE).wait_for_line(
        r"cannot connect to the master's HA port \S+ over TLS: CERTIFICATE_VERIFY_FAILED", 1)


def test_a_permissive_master_takes_tls_and_plaintext_slaves(tmp_path: Path, certs: dict[str, CertificatePair]) -> None:
    broker = certs["broker"]
    permissive = server_keys(broker, "permissive")
    with HAGroup(tmp_path, slaves=0, namesrv_args=permissive, master_args=permissive) as group:
        group.start_slave(TLS_SLAVE, *permissive, *dial_keys(broker, broker))
        group.start_slave(PLAINTEXT_SLAVE)

        async def main() -> None:
            master = BrokerWire(group.master_addr)  # permissive: a plaintext client is served
            slaves = {i: BrokerWire(group.slave_addr(i)) for i in (TLS_SLAVE, PLAINTEXT_SLAVE)}
            try:
                async def both() -> bool:
                    return (await master.runtime())["haSlaveCount"] == "2"
                await eventually(both, 20, "both slaves connecting")
                bodies = await send_some(master, 50)
                for i, slave in slaves.items():
                    await replicated(group, master, i, slave, bodies)
            finally:
                await master.close()
                for slave in slaves.values():
                    await slave.close()
        asyncio.run(main())
        out = group.proc(0).output
        assert "(TLS and plaintext, tls.server.mode=permissive)" in out
        assert out.count("connected to the HA service over TLS") == 1, out
        assert out.count("connected to the HA service\n") == 1, out
        group.proc(TLS_SLAVE).wait_for_line(r"following the master at \S+ over TLS", 1)
        group.proc(PLAINTEXT_SLAVE).wait_for_line(r"following the master at \S+ from offset", 1)


@pytest.mark.slow  # etcd and two brokers, a failover and a restart (about 30 s)
@pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")
def test_up_ha_tls_replicates_over_tls_across_a_failover(tmp_path: Path) -> None:
    """`skiff up --ha --tls` (controller mode on etcd): the slave follows over TLS, and after a
    kill -9 of the master the new master's HA port serves the restarted broker over TLS too."""
    with UpHa(tmp_path, "--tls", "--no-dashboard") as up:
        assert up.proc is not None
        assert len(re.findall(r"id \d: pid \d+, .* HA port \d+ \(TLS\), ", up.proc.output)) == 2, up.proc.output
        tls = TlsClientConfig(auth_server=True, trust_cert_path=str(up.store / "tls" / "skiff.crt"))
        first = up.master_id
        other = 2 if first == 1 else 1
        up.wait_line(rf"\[broker {other}\] .*following the master at \S+ over TLS", 10)

        async def send_to(broker_id: int, bodies: list[bytes]) -> None:
            wire = BrokerWire(up.brokers[broker_id].addr, tls=tls, broker_name="broker-ha")
            try:
                for body in bodies:  # SYNC_MASTER: SUCCESS once the slave acknowledged it over TLS
                    resp = await wire.send(Message(TOPIC, body))
                    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            finally:
                await wire.close()

        before = [f"before {i}".encode() for i in range(5)]
        asyncio.run(send_to(first, before))
        mark = up.mark()
        os.kill(up.brokers[first].pid, signal.SIGKILL)
        epoch = up.wait_line(rf"id {other} \(pid \d+\) is MASTER now, epoch (\d+)", 30, mark)[1]
        restarted = up.wait_line(rf"id {first} restarted: pid (\d+)", 60, mark)[1]
        up.wait_line(rf"id {first} \(pid {restarted}\) is a slave of id {other}, epoch {epoch}, in sync", 30, mark)
        up.wait_line(rf"\[broker {first}\] .*following the master at \S+ over TLS", 10, mark)
        after = [f"after {i}".encode() for i in range(5)]
        asyncio.run(send_to(other, after))

        async def read_back() -> None:
            master = BrokerWire(up.brokers[other].addr, tls=tls)
            slave = BrokerWire(up.brokers[first].addr, tls=tls)
            try:
                end = await master.max_offset()

                async def caught_up() -> bool:
                    return await slave.max_offset() == end
                await eventually(caught_up, 20, "the restarted slave reaching the new master's end")
                on_master = [m.body for m in await master.pull_messages("G", TOPIC, 0)]
                assert on_master == before + after

                async def served() -> list[bytes] | None:  # once its metadata sync has the topic
                    return [m.body for m in await slave.pull_messages("G", TOPIC, 0)] or None
                assert await eventually(served, 20, "the restarted slave serving the topic") == on_master
            finally:
                await master.close()
                await slave.close()
        asyncio.run(read_back())
