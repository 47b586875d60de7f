"""The HA slave's read loop against a scripted master on a real socket, with real stores:
each read appended and answered in the protocol's callback, reports of its own only after
``haSendHeartbeatInterval`` of silence, and why it drops a connection (docs/replication.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig
from skiff.broker.ha.slave import HASlave
from skiff.common.config import build_config
from skiff.common.record import pack_host
from skiff.protocol.ha import REPORT, encode_frame_head
from skiff.store import MessageInput, MessageStore, StoreConfig
from skiff.testing.waits import eventually

pytestmark = pytest.mark.timeout(60)

HOST = pack_host("127.0.0.1", 10911)
HEARTBEAT_S = 0.6
HOUSEKEEPING_S = 2.0
ROUNDS = 6
"""Frames a quarter of the heartbeat interval apart: together longer than the interval."""


def open_store(root: Path) -> MessageStore:
    config = build_config(StoreConfig, {"storePathRootDir": str(root), "mappedFileSizeCommitLog": 1 << 20,
                                        "mappedFileSizeConsumeQueue": 20 * 64}, {})
    store = MessageStore(config, store_host=HOST)
    store.start()
    return store


def records(store: MessageStore, count: int) -> list[tuple[int, bytes]]:
    """``count`` records put into ``store``: (start offset, bytes) each, as a master holds them."""
    out = []
    for i in range(count):
        msg = MessageInput(topic="T", queue_id=0, body=f"replicated {i}".encode() * (i + 1), properties=b"",
                           flag=0, sys_flag=0, born_timestamp=1_000 + i, born_host=HOST)
        start = store.max_physical_offset
        assert store.put_message(msg).ok
        out.append((start, bytes(store.read_raw(start, store.max_physical_offset - start))))
    return out


async def report(reader: asyncio.StreamReader, timeout_s: float = 10.0) -> int:
    return REPORT.unpack(await asyncio.wait_for(reader.readexactly(REPORT.size), timeout_s))[0]


async def silent(reader: asyncio.StreamReader, window_s: float) -> bool:
    """True when the slave sends nothing for ``window_s`` (it was just answered a read)."""
    try:
        await asyncio.wait_for(reader.readexactly(1), window_s)
    except TimeoutError:
        return True
    return False


def test_the_slave_answers_each_read_reports_alone_only_when_idle_and_says_why_it_drops(tmp_path: Path) -> None:
    source, replica = open_store(tmp_path / "master"), open_store(tmp_path / "slave")
    sent = records(source, ROUNDS + 2)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        conns: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        server = await asyncio.start_server(lambda r, w: conns.put_nowait((r, w)), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        config = BrokerConfig(ha_master_address=f"127.0.0.1:{port}",
                              ha_send_heartbeat_interval_ms=int(HEARTBEAT_S * 1000),
                              ha_housekeeping_interval_ms=int(HOUSEKEEPING_S * 1000))
        slave = HASlave(config, replica)
        slave.start()
        try:
            reader, writer = await asyncio.wait_for(conns.get(), 10)
            assert await report(reader) == 0
            # A record cut by the frame's end waits for its rest: the answer covers whole records only.
            (start0, rec0), (start1, rec1) = sent[0], sent[1]
            writer.write(encode_frame_head(0, len(rec0) + 10) + rec0 + rec1[:10])
            assert await report(reader) == start1
            writer.write(encode_frame_head(start1 + 10, len(rec1) - 10) + rec1[10:])
            assert await report(reader) == start1 + len(rec1)
            # Reads closer together than haSendHeartbeatInterval: one report each, none of its own.
            for start, rec in sent[2:]:
                assert await silent(reader, HEARTBEAT_S / 4), "the slave reported while reads kept coming"
                writer.write(encode_frame_head(start, len(rec)) + rec)
                last_write = loop.time()
                assert await report(reader) == start + len(rec)
            end = source.max_physical_offset
            assert replica.max_physical_offset == end
            assert bytes(replica.read_raw(0, end)) == bytes(source.read_raw(0, end))
            # Silence: a report every haSendHeartbeatInterval, then the connection dropped.
            beats = []
            while (data := await asyncio.wait_for(reader.read(REPORT.size), 10)):
                data += await reader.readexactly(REPORT.size - len(data))
                assert REPORT.unpack(data)[0] == end
                beats.append(loop.time() - last_write)
            assert beats, "no heartbeat report while the master was silent"
            assert all(at >= (n + 1) * HEARTBEAT_S - 0.001 for n, at in enumerate(beats)), beats
            assert loop.time() - last_write >= HOUSEKEEPING_S
            assert slave.last_drop == f"nothing read for {HOUSEKEEPING_S:g} s (haHousekeepingInterval)"
            # Reconnected: a frame that does not continue its CommitLog drops the connection, nothing appended.
            reader, writer = await asyncio.wait_for(conns.get(), 10)
            assert await report(reader) == end
            writer.write(encode_frame_head(start1, len(rec1)) + rec1)
            assert await asyncio.wait_for(reader.read(), 10) == b""
            assert slave.last_drop == f"the master pushed offset {start1}, not this slave's max offset {end}"
            assert replica.max_physical_offset == end
            # Paused for an election: nothing more is appended.
            reader, writer = await asyncio.wait_for(conns.get(), 10)
            assert await report(reader) == end
            slave.pause()
            await eventually(lambda: slave.last_drop == "paused for an election", 10, "the pause dropping the link")
            assert replica.max_physical_offset == end
        finally:
            await slave.stop()
            server.close()
    try:
        asyncio.run(main())
    finally:
        source.shutdown()
        replica.shutdown()
