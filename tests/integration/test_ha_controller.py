"""Controller mode on a real etcd: election, failover after kill -9 with SYNC_MASTER
sends, a demoted master cutting its unreplicated tail (docs/replication.md)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.etcd import Etcd, etcd_binary
from skiff.testing.ha import ControllerGroup
from skiff.testing.processes import free_port, run_skiff, start_skiff
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(etcd_binary() is None, reason="etcd is not installed (make etcd)")]


async def info(addr: str) -> dict[str, str] | None:
    wire = BrokerWire(addr, timeout_ms=1000)
    try:
        resp = await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body).table) if resp.code == ResponseCode.SUCCESS else None
    except Exception:  # noqa: BLE001 - a dead broker
        return None
    finally:
        await wire.close()


async def master_of(group: ControllerGroup) -> int | None:
    """The running broker that says it is master (and has a live lease)."""
    for i in group.running():
        table = await info(group.addr(i))
        if table is not None and table["brokerRole"] != "SLAVE":
            return i
    return None


async def sync_set(group: ControllerGroup, broker_id: int) -> str:
    table = await info(group.addr(broker_id))
    return "" if table is None else table.get("controllerSyncStateSet", "")


def test_election_failover_and_rejoin(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint) as group:
        async def main() -> None:
            first = await eventually(lambda: master_of(group), 20, "a master elected")
            other = next(i for i in group.broker_ids if i != first)
            await eventually(lambda: _is(sync_set(group, first), "1,2"), 20, "both brokers in the SyncStateSet")
            wire = BrokerWire(group.addr(first))
            acked = []
            for i in range(20):
                resp = await wire.send(Message("C", f"m{i}".encode()), queue_id=0)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                acked.append(f"m{i}".encode())
            await wire.close()
            refused = await BrokerWire(group.addr(other)).send(Message("C", b"to the slave"))
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            killed_at = time.monotonic()
            group.kill_broker(first)
            assert await eventually(lambda: master_of(group), 15, "a new master") == other
            failover_s = time.monotonic() - killed_at
            assert failover_s <= 5.0, f"failover took {failover_s:.1f} s"
            new = BrokerWire(group.addr(other))
            resp = await new.send(Message("C", b"after failover"), queue_id=0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            acked.append(b"after failover")
            group.start_broker(first)
            await eventually(lambda: _is(sync_set(group, other), "1,2"), 20, "the old master back in sync")
            stored = await new.pull_messages("G", "C", 0)
            assert [m.body for m in stored] == acked
            old = BrokerWire(group.addr(first))
            assert [m.body for m in await old.pull_messages("G", "C", 0)] == acked
            await old.close()
            await new.close()
        asyncio.run(main())


async def _is(value: object, expected: str) -> bool:
    return await value == expected  # type: ignore[misc]


class KeyedSender:
    """Producers of a few keys, each sending 0, 1, 2, ... to its own queue of whichever broker
    is master, resending a number until it is answered SEND_OK (duplicates allowed)."""

    def __init__(self, group: ControllerGroup, keys: int) -> None:
        self.group = group
        self.keys = keys
        self.acked: dict[int, list[int]] = {k: [] for k in range(keys)}
        self.statuses: dict[int, int] = {}
        self.master: int | None = None
        self.running = True

    async def run(self, key: int) -> None:
        seq = 0
        wire: BrokerWire | None = None
        while self.running:
            if wire is None:
                self.master = await master_of(self.group) or self.master
                if self.master is None:
                    await asyncio.sleep(0.1)
                    continue
                wire = BrokerWire(self.group.addr(self.master), timeout_ms=3000)
            try:
                resp = await wire.send(Message("K", f"{key}:{seq}".encode()), queue_id=key)
                code = resp.code
            except Exception:  # noqa: BLE001 - the master died under us
                code = -1
            self.statuses[code] = self.statuses.get(code, 0) + 1
            if code == ResponseCode.SUCCESS:
                self.acked[key].append(seq)
                seq += 1
            else:
                await wire.close()
                wire = None
                await asyncio.sleep(0.05)
        if wire is not None:
            await wire.close()


def test_kill_the_master_repeatedly_while_sync_sends_run(tmp_path: Path) -> None:
    with Etcd(tmp_path / "etcd") as etcd, ControllerGroup(tmp_path, etcd.endpoint,
                                                          broker_args=["--slaveTimeout=1000"]) as group:
        async def main() -> None:
            await eventually(lambda: master_of(group), 20, "a master elected")
            sender = KeyedSender(group, keys=4)
            tasks = [asyncio.create_task(sender.run(k)) for k in range(4)]
            failovers = []
            try:
                for _ in range(2):
                    master = await eventually(lambda: master_of(group), 20, "a master")
                    await eventually(lambda m=master: _is(sync_set(group, m), "1,2"), 30, "both in sync")
                    before = sum(map(len, sender.acked.values()))
                    await eventually(lambda b=before: sum(map(len, sender.acked.values())) > b + 50, 20,
                                     "sends acknowledged")
                    killed_at = time.monotonic()
                    group.kill_broker(master)
                    new = await eventually(lambda: master_of(group), 15, "a new master")
                    failovers.append(time.monotonic() - killed_at)
                    assert new != master
                    group.start_broker(master)
                after = sum(map(len, sender.acked.values()))
                await eventually(lambda: sum(map(len, sender.acked.values())) > after + 20, 20, "sends after")
            finally:
                sender.running = False
                await asyncio.gather(*tasks)
            assert max(failovers) <= 5.0, failovers
            final = await eventually(lambda: master_of(group), 20, "a master")
            wire = BrokerWire(group.addr(final))
            try:
                for key, acked in sender.acked.items():
                    stored = [int(m.body.split(b":")[1]) for m in await wire.pull_messages("G", "K", key)]
                    first_seen = list(dict.fromkeys(stored))
                    assert first_seen == sorted(first_seen), f"key {key} out of order"
                    missing = set(acked) - set(stored)
                    assert not missing, f"key {key}: acknowledged but lost: {sorted(missing)[:10]}"
            finally:
                await wire.close()
            print(f"failovers {['%.2f' % f for f in failovers]} s, statuses {sender.statuses}")
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
            await eventually(lambda: _is(sync_set(group, first), "1,2"), 20, "both in the SyncStateSet")
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
            assert await eventually(lambda: master_of(group), 20, "the slave elected") == other
            group.start_broker(first)
            await eventually(lambda: _is(sync_set(group, other), "1,2"), 30, "the old master back in sync")
            expected = [f"kept {i}".encode() for i in range(10)]
            assert [m.body for m in await slave.pull_messages("G", "A", 0)] == expected
            old = BrokerWire(group.addr(first))
            assert [m.body for m in await old.pull_messages("G", "A", 0)] == expected
            await old.close()
            await slave.close()
            assert "the master of epoch 2 never had" in group.proc(first).output
        asyncio.run(main())


def test_skiff_up_ha_runs_etcd_and_an_elected_pair(tmp_path: Path) -> None:
    ports = [free_port() for _ in range(3)]
    proc = start_skiff(["up", "--ha", "--dir", str(tmp_path), "--namesrv-port", str(ports[0]),
                        "--broker-port", str(ports[1]), "--etcd-port", str(ports[2])], timeout_s=60)
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
