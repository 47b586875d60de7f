"""Controller sessions across an etcd leader change (docs/replication.md, docs/reliability.md).

The bug these pin: with the etcd leader killed, a broker's lease keep-alive timed out on the
member it talked to and moved to another one, closing the old client while the session's
round still awaited a call on it. grpc ends such a call with asyncio.CancelledError, which no
``except Exception`` caught: the session loop ended silently, the lease expired, and the
broker never looked at etcd again (no master, no sends)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from skiff.broker.ha.controller import ControllerError, EtcdGroup
from skiff.common.message import Message
from skiff.common.record import parse_host_port
from skiff.protocol.codes import ResponseCode
from skiff.testing.etcd import Etcd, EtcdCluster, etcd_binary
from skiff.testing.failover import master_of
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]

LEASE_S = 2.0


def test_an_etcd_call_whose_client_is_closed_under_it_fails_as_a_controller_error(tmp_path: Path) -> None:
    """grpc cancels a call locally when its channel closes: that is an etcd failure the session
    handles (ControllerError), not a cancellation that ends the session's task."""
    with Etcd(tmp_path / "etcd") as etcd:
        proc = etcd.proc
        assert proc is not None

        async def main() -> None:
            group = EtcdGroup((etcd.endpoint,), "c", "g", 2)
            await group.connect()
            proc.send_signal(signal.SIGSTOP)
            try:
                call = asyncio.create_task(group.read())
                done, _ = await asyncio.wait({call}, timeout=0.3)
                assert not done, "a read from a stopped etcd answered"
                await group.close()  # what change_member does to the client it leaves
                with pytest.raises(ControllerError):
                    await asyncio.wait_for(call, 5)
                assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]
            finally:
                proc.send_signal(signal.SIGCONT)
        asyncio.run(main())


async def _lives(endpoints: list[str]) -> dict[int, int]:
    """broker id -> lease of its live key, read through any member that answers."""
    import aetcd
    for endpoint in endpoints:
        host, port = parse_host_port(endpoint)
        client = aetcd.Client(host, port, timeout=1, connect_wait_timeout=1)
        try:
            found = await asyncio.wait_for(client.get_prefix(b"/skiff/"), 2)
        except Exception:  # noqa: BLE001 - a dead member, try the next
            continue
        finally:
            try:
                await client.close()
            except Exception:  # noqa: BLE001
                pass
        return {int(kv.key.rsplit(b"/", 1)[1]): kv.lease for kv in found.kvs if b"/live/" in kv.key}
    return {}


def test_the_etcd_leader_vanishing_keeps_the_group_writable_and_its_leases_renewed(tmp_path: Path) -> None:
    """Three etcd members; the leader, the member the brokers talk to, stops answering (SIGSTOP:
    a host gone off the network, or a killed leader's followers waiting for a new one): the other
    two keep quorum, so within a few leases the group has a master taking sends and every
    broker's lease is renewed (its live key outlives two lease TTLs after the leader went)."""
    with EtcdCluster(tmp_path / "etcd", 3) as cluster, \
            ControllerGroup(tmp_path, cluster.endpoints, lease_ms=int(LEASE_S * 1000)) as group:
        async def writable() -> int | None:
            m = await master_of(group)
            if m is None:
                return None
            wire = BrokerWire(group.addr(m), timeout_ms=2000)
            try:
                resp = await wire.send(Message("L", b"x"), queue_id=0)
            except Exception:  # noqa: BLE001 - a broker stepping down
                return None
            finally:
                await wire.close()
            return m if resp.code == ResponseCode.SUCCESS else None

        async def main() -> None:
            await eventually(writable, 20, "a writable master")
            await eventually(lambda: cluster.make_leader(0), 10, "member 0 (the brokers' first endpoint) leader")
            proc = cluster.members[0].proc
            assert proc is not None
            proc.send_signal(signal.SIGSTOP)
            try:
                gone_at = time.monotonic()
                left = [m.endpoint for m in cluster.members[1:]]
                await eventually(writable, 4 * LEASE_S, "a writable master after the etcd leader went")

                async def all_leased() -> bool:
                    return set(await _lives(left)) >= set(group.broker_ids)
                await eventually(all_leased, 4 * LEASE_S, "a live key (a renewed lease) for every broker")
                while time.monotonic() - gone_at < 3 * LEASE_S:  # a lease nobody renews is gone by then
                    lives = await _lives(left)
                    assert set(lives) >= set(group.broker_ids), f"a broker's lease expired: {lives}"
                    await asyncio.sleep(0.2)
                assert await writable() is not None, "no writable master"
            finally:
                proc.send_signal(signal.SIGCONT)
        asyncio.run(main())


def test_a_full_disk_while_following_does_not_end_controller_mode(tmp_path: Path) -> None:
    """The epoch file's write on following a new master fails (ENOSPC): the session logs it
    and starts again, and follows once the write succeeds (before, the exception ended the
    controller session task for good: no following, no election until a restart)."""
    from types import SimpleNamespace

    from skiff.broker.config import BrokerConfig
    from skiff.broker.ha.controller import GroupState
    from skiff.broker.ha.replicas import ReplicasManager
    from skiff.broker.ha.role import Role
    from skiff.common.config import build_config

    with Etcd(tmp_path / "etcd") as etcd:
        async def main() -> None:
            config = build_config(BrokerConfig, {
                "brokerName": "b", "brokerId": 1, "brokerRole": "SYNC_MASTER", "enableControllerMode": "true",
                "controllerEtcdEndpoints": etcd.endpoint, "controllerLeaseTtl": 2000})
            master = GroupState(9, "127.0.0.1:1", "127.0.0.1:2", 1, (9,), 1, ((1, 0),))
            other = EtcdGroup((etcd.endpoint,), config.broker_cluster_name, config.broker_name, 30)
            await other.connect()
            assert await other.elect(master, await other.read())
            root = tmp_path / "store"
            root.mkdir()
            store = SimpleNamespace(config=SimpleNamespace(root=str(root)), max_physical_offset=0,
                                    set_visible_end=lambda end: None, truncate=lambda cut: 0)
            followed: list[str] = []
            slave = SimpleNamespace(pause=lambda: None, resume=lambda: None, follow=followed.append,
                                    connected=True, local_addr="")

            async def nothing(state: GroupState) -> None:
                return None
            manager = ReplicasManager(config, Role.of(config), store, SimpleNamespace(), slave,  # type: ignore[arg-type]
                                      "127.0.0.1:3", "127.0.0.1:4", on_master=nothing, on_slave=nothing)
            save, failures = manager.epochs.save, [OSError(28, "No space left on device")]

            def full_once(epochs: object) -> None:
                if failures:
                    raise failures.pop()
                save(epochs)  # type: ignore[arg-type]
            manager.epochs.save = full_once  # type: ignore[method-assign]
            manager.start()
            try:
                await eventually(lambda: followed, 30, "the broker following the master after the full disk")
                assert followed == ["127.0.0.1:2"] and not failures
            finally:
                await manager.stop()
                await other.resign()
                await other.close()
        asyncio.run(main())
