"""Failover checks for controller mode, shared by tests/integration/test_ha_controller.py and
`skiff bench failover`: keyed producers that resend until SEND_OK, killing the master
repeatedly, and the check that every SEND_OK message survived in order per key."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from skiff.common.message import Message
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.ha import ControllerGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

TOPIC = "K"


async def info(addr: str) -> dict[str, str] | None:
    """A broker's runtime table, or None when it does not answer."""
    wire = BrokerWire(addr, timeout_ms=1000)
    try:
        resp = await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body).table) if resp.code == ResponseCode.SUCCESS else None
    except Exception:  # noqa: BLE001 - a dead broker
        return None
    finally:
        await wire.close()


async def master_of(group: ControllerGroup) -> int | None:
    """The running broker that says it is master."""
    for i in group.running():
        table = await info(group.addr(i))
        if table is not None and table["brokerRole"] != "SLAVE":
            return i
    return None


async def sync_set(group: ControllerGroup, broker_id: int) -> str:
    table = await info(group.addr(broker_id))
    return "" if table is None else table.get("controllerSyncStateSet", "")


class Progress(Protocol):
    @property
    def acked_count(self) -> int:
        """Messages answered SEND_OK so far."""


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

    @property
    def acked_count(self) -> int:
        return sum(map(len, self.acked.values()))

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
                code = (await wire.send(Message(TOPIC, f"{key}:{seq}".encode()), queue_id=key)).code
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


async def kill_masters(group: ControllerGroup, sender: Progress, kills: int,
                       kill_log: list[float] | None = None) -> list[float]:
    """Kill -9 the master ``kills`` times, each once both brokers are in sync and sends flow
    (``sender``'s SEND_OK count grows),
    restarting it after a successor is elected; return each failover's seconds (kill → the
    other broker reports itself master); ``kill_log`` gets each kill's wall-clock time."""
    failovers = []
    for _ in range(kills):
        master = await eventually(lambda: master_of(group), 20, "a master")
        await eventually(lambda: all_in_sync(group, master), 30, "every broker in sync")
        before = sender.acked_count
        await eventually(lambda: sender.acked_count > before + 50, 20, "sends acknowledged")
        killed_at = time.monotonic()
        if kill_log is not None:
            kill_log.append(time.time())
        group.kill_broker(master)
        new = await eventually(lambda: master_of(group), 15, "a new master")
        failovers.append(time.monotonic() - killed_at)
        if new == master:
            raise AssertionError(f"broker {master} was killed but reports itself master")
        group.start_broker(master)
    after = sender.acked_count
    await eventually(lambda: sender.acked_count > after + 20, 20, "sends after the last failover")
    return failovers


async def check_delivery(group: ControllerGroup, sender: KeyedSender) -> dict[str, Any]:
    """Once every broker is in sync: read every key's queue from the master and its copies on
    the others. ``lost``: SEND_OK numbers missing; ``duplicates``: extra copies (resends
    of numbers whose answer was lost); ``out_of_order_keys``: keys whose first occurrences are
    not in sending order; ``copies_equal``: the followers hold the same messages."""
    final = await eventually(lambda: master_of(group), 20, "a master")
    await eventually(lambda: all_in_sync(group, final), 30, "every broker in sync at the end")
    wire = BrokerWire(group.addr(final))
    followers = [BrokerWire(group.addr(i)) for i in group.broker_ids if i != final]
    lost = duplicates = 0
    disorder: list[int] = []
    equal = True
    try:
        for key, acked in sender.acked.items():
            records = await wire.pull_messages("G", TOPIC, key)
            stored = [int(m.body.split(b":")[1]) for m in records]
            first_seen = list(dict.fromkeys(stored))
            if first_seen != sorted(first_seen):
                disorder.append(key)
            lost += len(set(acked) - set(stored))
            duplicates += len(stored) - len(first_seen)
            for follower in followers:
                copy = await follower.pull_messages("G", TOPIC, key)
                equal = equal and [m.body for m in copy] == [m.body for m in records]
    finally:
        for w in (wire, *followers):
            await w.close()
    return {"acked": sender.acked_count, "lost": lost, "duplicates": duplicates, "out_of_order_keys": disorder,
            "copies_equal": equal, "statuses": dict(sender.statuses)}


async def all_in_sync(group: ControllerGroup, master: int) -> bool:
    """``master``'s SyncStateSet names every broker of the group."""
    return await sync_set(group, master) == ",".join(map(str, group.broker_ids))


async def equals(value: Any, expected: str) -> bool:
    return bool(await value == expected)
