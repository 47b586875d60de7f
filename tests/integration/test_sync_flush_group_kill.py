"""SYNC_FLUSH group commit under a producer with 64 single sends in flight: the fsyncs are
shared (fewer fsyncs than acknowledged sends), and every send acknowledged before a
SIGKILL, which lands while 64 more are in flight, is in the store after the restart.

A SEND_OK under SYNC_FLUSH promises the message was fsynced; a group commit that
answered a write its fsync did not cover (skiff.store.flush, a group resolved while
still open to writes) would lose acknowledged messages here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.testing.processes import start_broker
from skiff.testing.wire import BrokerWire
from skiff.transport.loop import run_coroutine

IN_FLIGHT = 64
QUEUES = 4
ACKED_BEFORE_KILL = 1500


@pytest.mark.slow
def test_sigkill_with_64_sends_in_flight_loses_no_acknowledged_message(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, "", "--flushDiskType=SYNC_FLUSH")
    acked: dict[int, str] = {}
    fsyncs: list[int] = []

    async def produce() -> None:
        wire = BrokerWire(broker.addr, timeout_ms=10_000)
        probe = BrokerWire(broker.addr, timeout_ms=10_000)
        stop = asyncio.Event()
        seq = iter(range(10**9))

        async def sender() -> None:
            while not stop.is_set():
                i = next(seq)
                try:
                    resp = await wire.send(Message.of("GroupKill", f"m{i}".encode() * 20), queue_id=i % QUEUES)
                except Exception:  # noqa: BLE001 - in flight at the kill: not acknowledged
                    return
                if resp.code == ResponseCode.SUCCESS:
                    acked[i] = resp.ext("msgId")
                if len(acked) >= ACKED_BEFORE_KILL:
                    stop.set()

        try:
            senders = [asyncio.ensure_future(sender()) for _ in range(IN_FLIGHT)]
            await asyncio.wait_for(stop.wait(), 120)
            table = KVTable.from_json((await probe.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
            fsyncs.append(int(table["fsyncTotal"]))
            await asyncio.get_running_loop().run_in_executor(None, broker.kill)  # sends still in flight
            await asyncio.wait_for(asyncio.gather(*senders), 60)
        finally:
            await wire.close()
            await probe.close()

    try:
        run_coroutine(produce())
    finally:
        broker.kill()
    assert len(acked) >= ACKED_BEFORE_KILL
    # shared: one fsync answers many sends (one each would be >= ACKED_BEFORE_KILL)
    assert fsyncs[0] < len(acked) // 2, (fsyncs, len(acked))

    again = start_broker(tmp_path, "", "--flushDiskType=SYNC_FLUSH")
    try:
        async def check() -> None:
            wire = BrokerWire(again.addr)
            try:
                stored = {m.offset_msg_id: m.body for q in range(QUEUES)
                          for m in await wire.pull_messages("G", "GroupKill", q)}
            finally:
                await wire.close()
            lost = [i for i, msg_id in acked.items() if stored.get(msg_id) != f"m{i}".encode() * 20]
            assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost or changed, e.g. {lost[:5]}"
        run_coroutine(check())
        assert "clean_shutdown=False" in again.output
    finally:
        again.stop()
