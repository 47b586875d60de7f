"""Controller mode on a real etcd: election, failover after kill -9 with SYNC_MASTER
sends and rejoining, a demoted master cutting its unreplicated tail, `skiff up --ha`
(docs/replication.md)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skiff.broker.ha.etcd_process import ELECTION_TIMEOUT_MS
from skiff.common.message import Message
from skiff.protocol.codes import ResponseCode
from skiff.testing.etcd import Etcd, EtcdCluster, etcd_binary
from skiff.testing.failover import (
    KeyedSender,
    check_delivery,
    equals,
    info,
    kill_masters,
    master_of,
    sync_set,
)
from skiff.testing.ha import ControllerGroup
from skiff.testing.processes import free_port, run_skiff, start_skiff
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire
from skiff.testing.up_ha import free_ports_apart

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]


def test_kill_the_master_repeatedly_while_sync_sends_run(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint,
                                                          broker_args=["--slaveTimeout=1000"]) as group:
        async def main() -> None:
            await eventually(lambda: master_of(group), 20, "a master elected")
            sender = KeyedSender(group, keys=4)
            tasks = [asyncio.create_task(sender.run(k)) for k in range(4)]
            try:
                failovers = await kill_masters(group, sender, kills=2)
            finally:
                sender.running = False
                await asyncio.gather(*tasks)
            assert max(failovers) <= 5.0, failovers
            final = await eventually(lambda: master_of(group), 20, "a master")
            other = next(i for i in group.broker_ids if i != final)
            follower = BrokerWire(group.addr(other))
            try:
                refused = await follower.send(Message("K", b"to the slave"))
                assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (refused.remark or "")
            finally:
                await follower.close()
            report = await check_delivery(group, sender)
            assert report["lost"] == 0 and report["out_of_order_keys"] == [] and report["copies_equal"], report
            print(f"failovers {['%.2f' % f for f in failovers]} s, {report}")
        asyncio.run(main())


def test_a_demoted_master_cuts_the_tail_its_successor_never_had(tmp_path: Path) -> None:
    """ASYNC_MASTER answers before the slave has a message: with the slave stopped, the
    master's last sends exist on it alone; when it dies the slave is elected without them,
    and the old master, back, cuts them before following (they were never SEND_OK under
    SYNC_MASTER; this is what ASYNC_MASTER trades for speed)."""
    slow_to_drop = ["--haHousekeepingInterval=1000", "--haMaxTimeSlaveNotCatchup=60000"]
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint, role="ASYNC_MASTER",
                                                          broker_args=slow_to_drop) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: equals(sync_set(group, first), "1,2"), 20, "both in the SyncStateSet")
            wire = BrokerWire(group.addr(first))
            for i in range(10):
                assert (await wire.send(Message("A", f"kept {i}".encode()), queue_id=0)).code == ResponseCode.SUCCESS
            slave = BrokerWire(group.addr(other))

            async def copied() -> bool:
                return (await info(group.addr(other)) or {}).get("commitLogMaxOffset") == \
                    (await info(group.addr(first)) or {}).get("commitLogMaxOffset")
            await eventually(copied, 15, "the slave catching up")
            group.proc(other).signal(signal.SIGSTOP)
            try:
                async def dropped() -> bool:
                    return (await info(group.addr(first)) or {}).get("haSlaveCount") == "0"
                await eventually(dropped, 15, "the master dropping the silent slave's connection")
                for i in range(5):
                    resp = await wire.send(Message("A", f"lost {i}".encode()), queue_id=0)
                    assert resp.code == ResponseCode.SUCCESS
                await wire.close()
                group.kill_broker(first)
            finally:
                group.proc(other).signal(signal.SIGCONT)
            try:
                assert await eventually(lambda: master_of(group), 20, "the slave elected") == other
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{group.proc(other).output[-4000:]}") from None
            group.start_broker(first)
            await eventually(lambda: equals(sync_set(group, other), "1,2"), 30, "the old master back in sync")
            expected = [f"kept {i}".encode() for i in range(10)]
            first_pull = await slave.pull("G", "A", 0, 0)
            assert [m.body for m in await slave.pull_messages("G", "A", 0)] == expected, \
                (first_pull.code, first_pull.remark)
            old = BrokerWire(group.addr(first))
            assert [m.body for m in await old.pull_messages("G", "A", 0)] == expected
            await old.close()
            await slave.close()
            assert "the master of epoch 2 never had" in group.proc(first).output
        asyncio.run(main())


def test_skiff_up_ha_runs_etcd_and_an_elected_pair(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(4)]  # etcd's peer port too: client port + 1 may be taken
    ports[1] = free_ports_apart((0, 1, 10, 11))  # each broker's listen and HA ports, broker 2's 10 above
    proc = start_skiff(["up", "--ha", "--dir", str(tmp_path), "--namesrv-port", str(ports[0]),
                        "--broker-port", str(ports[1]), "--etcd-port", str(ports[2]),
                        "--etcd-peer-port", str(ports[3]), "--grpc-port", "0", "--metrics-port", "0",
                        "--namesrv-metrics-port", "0", "--kafka-port", "0", "--no-dashboard"], timeout_s=60)
    try:
        proc.wait_for_line(r"id \d: .*\(MASTER, epoch 1\)", 10)

        def listing() -> list[dict] | None:
            listed = run_skiff(["cluster", "list", "--json", "-n", f"127.0.0.1:{ports[0]}"])
            assert listed.returncode == 0, listed.stdout
            brokers = json.loads(listed.stdout)
            epochs = [b["runtime"].get("controllerEpoch") for b in brokers]
            return brokers if len(brokers) == 2 and epochs == ["1", "1"] else None
        brokers = wait_for(listing, 20, "both brokers listed in epoch 1")
        assert sorted(b["runtime"]["brokerRole"] for b in brokers) == ["SLAVE", "SYNC_MASTER"]
        assert sorted(b["broker_id"] for b in brokers)[0] == 0
    finally:
        assert proc.stop() == 0


def test_with_etcd_gone_the_master_fences_itself_and_no_second_master_appears(tmp_path: Path) -> None:
    """etcd stopped: the master cannot renew its lease, so within the lease it refuses sends
    (pulls are still served); the slave cannot be elected; with etcd back there is one master
    again and sends succeed."""
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint) as group:
        proc = etcd.proc
        assert proc is not None
        asyncio.run(fenced_without_etcd(group, lambda: proc.send_signal(signal.SIGSTOP),
                                        lambda: proc.send_signal(signal.SIGCONT)))


@pytest.mark.slow
def test_an_etcd_cluster_losing_a_member_keeps_its_master_and_losing_its_majority_fences_it(
        tmp_path: Path) -> None:
    """Three etcd members. The one the brokers talk to stopped: they go on through another
    with the same leases, so the master takes every send and keeps its term. A second one
    stopped: the one left answers connections but cannot renew or grant a lease, so the
    brokers see what they see with etcd stopped; both back (same data): one writable master."""
    with EtcdCluster(tmp_path / "etcd", 3) as cluster, ControllerGroup(tmp_path, cluster.endpoints) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            epoch = (await info(group.addr(first)) or {})["controllerEpoch"]
            wire = BrokerWire(group.addr(first), timeout_ms=3000)
            cluster.members[0].stop()
            try:
                deadline = time.monotonic() + 4  # twice the lease
                while time.monotonic() < deadline:
                    resp = await wire.send(Message("M", b"one member gone"), queue_id=0)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark
                    await asyncio.sleep(0.05)
            finally:
                await wire.close()
            assert await master_of(group) == first
            assert (await info(group.addr(first)) or {})["controllerEpoch"] == epoch
            await fenced_without_etcd(group, cluster.members[1].stop, lambda: cluster.start_members([0, 1]))
        asyncio.run(main())


async def fenced_without_etcd(group: ControllerGroup, lose: Callable[[], object],
                              restore: Callable[[], object]) -> None:
    """What docs/replication.md promises with etcd's majority gone (``lose``) and back (``restore``)."""
    first = await eventually(lambda: master_of(group), 20, "a master elected")
    wire = BrokerWire(group.addr(first), timeout_ms=3000)
    assert (await wire.send(Message("E", b"before"), queue_id=0)).code == ResponseCode.SUCCESS
    lose()
    try:
        stopped_at = time.monotonic()

        async def fenced() -> bool:
            resp = await wire.send(Message("E", b"during"), queue_id=0)
            return resp.code == ResponseCode.SERVICE_NOT_AVAILABLE and "lease" in (resp.remark or "")
        await eventually(fenced, 10, "the master refusing sends")
        # 0.9 x the 2 s lease from the last renewal, which a leader that lost its quorum still grants
        # until it steps down (CheckQuorum, one election timeout), plus a send
        assert time.monotonic() - stopped_at <= 0.9 * 2.0 + ELECTION_TIMEOUT_MS / 1000 + 0.7
        pulled = await wire.pull_messages("G", "E", 0)
        assert pulled and pulled[0].body == b"before"
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # twice the lease: nobody else takes over
            roles = [(await info(group.addr(i)) or {}).get("brokerRole") for i in group.broker_ids]
            assert roles.count("SLAVE") >= 1, roles
            await asyncio.sleep(0.2)
    finally:
        restore()

    async def writable_master() -> int | None:
        m = await master_of(group)
        if m is None:
            return None
        w = BrokerWire(group.addr(m), timeout_ms=3000)
        try:
            ok = (await w.send(Message("E", b"after"), queue_id=0)).code == ResponseCode.SUCCESS
        finally:
            await w.close()
        return m if ok else None
    master = await eventually(writable_master, 20, "a writable master after etcd returns")

    async def one_master() -> bool:  # a fenced old master steps down at its next look at etcd
        roles = [(await info(group.addr(i)) or {}).get("brokerRole") for i in group.broker_ids]
        return [i for i, r in zip(group.broker_ids, roles) if r not in (None, "SLAVE")] == [master]
    await eventually(one_master, 10, "only the new master calling itself master")
    await wire.close()
