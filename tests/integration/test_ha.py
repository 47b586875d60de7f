"""Classic HA with real processes: a master streaming its CommitLog to slaves over the HA
port, SYNC_MASTER's statuses, slaves restarting and joining late (docs/replication.md)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from skiff.common.message import Message
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.ha import FRAME_HEAD, encode_report
from skiff.protocol.message_codec import decode_stored_messages
from skiff.testing.ha import HAGroup
from skiff.testing.waits import eventually
from skiff.testing.wire import BrokerWire

pytestmark = pytest.mark.timeout(120)

FILE_1M = "--mappedFileSizeCommitLog=1048576"
SMALL_FRAMES = "--haTransferBatchSize=1024"



async def caught_up(master: BrokerWire, slave: BrokerWire, timeout_s: float = 30.0) -> int:
    target = await master.max_offset()

    async def check() -> bool:
        return await slave.max_offset() == target
    await eventually(check, timeout_s, f"the slave reaching the master's offset {target}")
    return target


def assert_same_bytes(group: HAGroup, slave_id: int, start: int, end: int) -> None:
    mine, master = group.commitlog_bytes(slave_id, start, end), group.commitlog_bytes(0, start, end)
    if mine != master:
        first = next((i for i, (a, b) in enumerate(zip(mine, master)) if a != b), min(len(mine), len(master)))
        raise AssertionError(f"slave {slave_id}'s CommitLog differs from the master's at offset {start + first} "
                             f"(lengths {len(mine)}, {len(master)}; compared [{start}, {end}))")


async def send_batches(wire: BrokerWire, topic: str, batches: int, per_batch: int, size: int) -> None:
    for b in range(batches):
        msgs = [Message.of(topic, bytes([b % 251]) * size + f"-{b}-{i}".encode(), keys=f"k{b}-{i}")
                for i in range(per_batch)]
        resp = await wire.send_batch(topic, msgs, queue_id=b % 2)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def test_slave_copies_the_commitlog_byte_for_byte_and_serves_pulls(tmp_path: Path) -> None:
    with HAGroup(tmp_path, broker_args=[FILE_1M, SMALL_FRAMES]) as group:
        async def main() -> None:
            master, slave = BrokerWire(group.master_addr), BrokerWire(group.slave_addr(1))
            try:
                # connected first: an empty slave that connects late starts at the master's last file
                await eventually(lambda: _slaves(master, "1"), 15, "the slave connecting")
                await send_batches(master, "HA", 6, 100, 3000)  # ~1.8 MB: records cut by 1 KiB frames, 2 files
                single = await master.send(Message.of("HA", b"one more", tags="T"), queue_id=1)
                assert single.code == ResponseCode.SUCCESS
                end = await caught_up(master, slave)
                assert end > 1 << 20
                assert_same_bytes(group, 1, 0, end)
                for q in (0, 1):
                    on_master = await master.pull_messages("G", "HA", q)
                    on_slave = await slave.pull_messages("G", "HA", q)
                    assert [m.body for m in on_slave] == [m.body for m in on_master]
                    assert [m.queue_offset for m in on_slave] == list(range(len(on_master)))
                assert on_slave[-1].body == b"one more"
                refused = await slave.send(Message("HA", b"to a slave"))
                assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
                assert "slave" in (refused.remark or "")
                info = await master.runtime()
                assert info["haSlaveCount"] == "1" and info["haSlaveAckOffset"] == str(end)
            finally:
                await master.close()
                await slave.close()
        asyncio.run(main())


def test_sync_master_statuses_with_a_slave_gone_and_a_stopped_slave(tmp_path: Path) -> None:
    with HAGroup(tmp_path, role="SYNC_MASTER", master_args=["--slaveTimeout=500", "--haHousekeepingInterval=3000"],
                 slave_args=["--haSendHeartbeatInterval=500"]) as group:
        async def main() -> None:
            master = BrokerWire(group.master_addr)
            try:
                await eventually(lambda: _slaves(master, "1"), 15, "the slave connecting")
                sends = await asyncio.gather(*(master.send(Message("S", f"m{i}".encode())) for i in range(20)))
                assert [r.code for r in sends] == [ResponseCode.SUCCESS] * 20
                slave_proc = group.proc(1)
                slave_proc.signal(signal.SIGSTOP)
                try:
                    began = time.monotonic()
                    late = await master.send(Message("S", b"while the slave is stopped"))
                    waited = time.monotonic() - began
                    assert late.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, late.remark
                    assert 0.4 <= waited < 3.0
                    assert late.ext("msgId") and late.ext("queueOffset") == "20"  # stored on the master
                    await eventually(lambda: _slaves(master, "0"), 15, "the master dropping the silent slave")
                    gone = await master.send(Message("S", b"no slave"))
                    assert gone.code == ResponseCode.SLAVE_NOT_AVAILABLE and gone.ext("queueOffset") == "21"
                finally:
                    slave_proc.signal(signal.SIGCONT)
                await eventually(lambda: _slaves(master, "1"), 20, "the slave reconnecting")
                back = await master.send(Message("S", b"slave back"))
                assert back.code == ResponseCode.SUCCESS, back.remark
                stored = await master.pull_messages("G", "S", 0)
                assert [m.body for m in stored][-3:] == [b"while the slave is stopped", b"no slave", b"slave back"]
                group.stop_broker(1)
                await eventually(lambda: _slaves(master, "0"), 15, "the master seeing the slave leave")
                none = await master.send(Message("S", b"after the slave stopped"))
                assert none.code == ResponseCode.SLAVE_NOT_AVAILABLE
            finally:
                await master.close()
        asyncio.run(main())


async def _slaves(wire: BrokerWire, count: str) -> bool:
    return (await wire.runtime())["haSlaveCount"] == count


def test_slave_restart_resumes_and_a_new_slave_starts_at_the_last_file(tmp_path: Path) -> None:
    with HAGroup(tmp_path, broker_args=[FILE_1M]) as group:
        async def main() -> None:
            master = BrokerWire(group.master_addr)
            try:
                await send_batches(master, "R", 2, 100, 2000)
                slave = BrokerWire(group.slave_addr(1))
                await caught_up(master, slave)
                await slave.close()
                group.stop_broker(1)
                await send_batches(master, "R", 5, 100, 2000)  # past the first file
                group.start_slave(1)
                slave = BrokerWire(group.slave_addr(1))
                end = await caught_up(master, slave)
                assert_same_bytes(group, 1, 0, end)
                assert len(await slave.pull_messages("G", "R", 0)) == 400  # batches 0 and 0, 2, 4 of queue 0
                await slave.close()
                group.slave_ids.append(2)
                group.start_slave(2)
                late = BrokerWire(group.slave_addr(2))
                end = await caught_up(master, late)
                last_file = end - end % (1 << 20)
                assert sorted(os.listdir(group.store_dir(2) / "commitlog")) == [f"{last_file:020d}"]
                assert_same_bytes(group, 2, last_file, end)
                copied = 0
                for q in (0, 1):
                    first = int((await late.pull("G", "R", q, 0)).ext("minOffset") or 0)
                    stored = await late.pull_messages("G", "R", q, first)
                    on_master = await master.pull_messages("G", "R", q, first)
                    assert [m.body for m in stored] == [m.body for m in on_master]
                    copied += len(stored)
                assert 0 < copied < 700
                await late.close()
            finally:
                await master.close()
        asyncio.run(main())


def test_the_master_reads_reports_cut_anywhere_and_drops_a_slave_acknowledging_too_much(tmp_path: Path) -> None:
    """The HA port's reports are handled in the protocol's callback: a report cut in two still
    starts the stream; an idle stream gets heartbeats; a report beyond the master's end closes the connection (a fake ack would
    answer SYNC_MASTER sends)."""
    with HAGroup(tmp_path, role="SYNC_MASTER", slaves=0, master_args=["--haSendHeartbeatInterval=200"]) as group:
        async def main() -> None:
            master = BrokerWire(group.master_addr)
            try:
                assert (await master.send(Message("S", b"m"))).code == ResponseCode.SLAVE_NOT_AVAILABLE
                reader, writer = await asyncio.open_connection("127.0.0.1", group.ha_ports[0])
                report = encode_report(0)
                writer.write(report[:3])
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.write(report[3:])
                head = FRAME_HEAD.unpack(await asyncio.wait_for(reader.readexactly(FRAME_HEAD.size), 10))
                assert head[0] == 0 and head[1] > 0  # the stored message, from the file's start
                await asyncio.wait_for(reader.readexactly(head[1]), 10)
                beat = FRAME_HEAD.unpack(await asyncio.wait_for(reader.readexactly(FRAME_HEAD.size), 10))
                assert beat == (head[1], 0)  # idle: an empty frame at the stream's end (haSendHeartbeatInterval)
                writer.write(encode_report(1 << 40))
                rest = await asyncio.wait_for(reader.read(), 10)  # the master closes: EOF after any heartbeat
                assert len(rest) % FRAME_HEAD.size == 0
                writer.close()
            finally:
                await master.close()
        asyncio.run(main())
