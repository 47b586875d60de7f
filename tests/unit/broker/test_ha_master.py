"""The HA master's sender against a scripted slave on a real socket, with a real store:
the appends of one loop step leave in one frame, a slave that stops reading holds the
master's buffer near its high mark (the rest waits in the CommitLog, not in memory), and
SYNC_MASTER sends are answered by the acknowledgement that covers them (docs/replication.md)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from skiff.broker.config import BrokerConfig, BrokerRole
from skiff.broker.ha.master import HAMaster
from skiff.common.record import pack_host
from skiff.protocol.ha import FRAME_HEAD, encode_report
from skiff.common.config import build_config
from skiff.common.limits import HA_SLAVE_GONE_GRACE_S
from skiff.store import MessageInput, MessageStore, PutStatus, StoreConfig
from skiff.testing.waits import eventually

pytestmark = pytest.mark.timeout(60)

HOST = pack_host("127.0.0.1", 10911)
BATCH = 4096
"""haTransferBatchSize: small, so the backlog below is many frames."""
SOCKET_BUFFER = 64 * 1024


def open_store(root: Path) -> MessageStore:
    config = build_config(StoreConfig, {"storePathRootDir": str(root), "mappedFileSizeCommitLog": 4 << 20}, {})
    store = MessageStore(config, store_host=HOST)
    store.start()
    return store


def put(store: MessageStore, i: int, size: int = 100) -> None:
    msg = MessageInput(topic="T", queue_id=0, body=bytes([i % 251]) * size, properties=b"", flag=0, sys_flag=0,
                       born_timestamp=1_000 + i, born_host=HOST)
    assert store.put_message(msg).ok


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    offset, size = FRAME_HEAD.unpack(await asyncio.wait_for(reader.readexactly(FRAME_HEAD.size), 10))
    return offset, await asyncio.wait_for(reader.readexactly(size), 10)


async def started(tmp_path: Path, role: BrokerRole) -> tuple[MessageStore, HAMaster]:
    store = open_store(tmp_path)
    config = BrokerConfig(broker_role=role, ha_transfer_batch_size=BATCH, slave_timeout_ms=5_000,
                          ha_housekeeping_interval_ms=120_000)  # the scripted slave reports only when told
    master = HAMaster(config, store, "127.0.0.1", 0)
    await master.start()
    return store, master


async def slave_of(master: HAMaster) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A scripted empty slave, streamed from offset 0. Both ends' kernel buffers are small, so
    a slave that stops reading fills them after a few hundred KiB on any host."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
    sock.connect(("127.0.0.1", master.port))
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(encode_report(0))
    await eventually(lambda: any(c.next_offset == 0 for c in master.connections), 10, "the stream starting")
    for conn in master.connections:
        conn.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    return reader, writer


def test_one_frame_per_loop_step_and_a_stopped_reader_bounds_the_buffer(tmp_path: Path) -> None:
    async def main() -> None:
        store, master = await started(tmp_path, BrokerRole.ASYNC_MASTER)
        try:
            reader, writer = await slave_of(master)
            # Five puts in one loop step: one frame carries them all.
            for i in range(5):
                put(store, i)
            end = store.max_physical_offset
            assert await read_frame(reader) == (0, bytes(store.read_raw(0, end)))
            put(store, 5)
            start = store.max_physical_offset
            assert await read_frame(reader) == (end, bytes(store.read_raw(end, start - end)))
            writer.write(encode_report(start))
            # The slave stops reading: the master fills its socket, then its buffer to the high
            # mark, and stops there; what is left waits in the CommitLog.
            conn = next(iter(master.connections))
            high = conn.writer.transport.get_write_buffer_limits()[1]
            i = 6
            while conn.writer.transport.get_write_buffer_size() < high:
                assert i < 200_000, "the master's buffer never reached its high mark"
                put(store, i)
                i += 1
                if i % 200 == 0:
                    await asyncio.sleep(0.001)
            for i in range(i, i + 2_000):  # more appends while it is over the mark
                put(store, i)
            await asyncio.sleep(0.2)  # a sender that ignored the mark would keep writing meanwhile
            assert conn.writer.transport.get_write_buffer_size() < high + BATCH + FRAME_HEAD.size
            assert conn.next_offset < store.max_physical_offset
            # Reading again: everything arrives, in order, byte for byte.
            got = bytearray()
            while start + len(got) < store.max_physical_offset:
                at, chunk = await read_frame(reader)
                assert at == start + len(got)
                got += chunk
            assert start + len(got) == store.max_physical_offset and _same(store, start, bytes(got))
            writer.close()
        finally:
            await master.stop()
            store.shutdown()
    asyncio.run(main())


def _same(store: MessageStore, start: int, got: bytes) -> bool:
    """read_raw stops at a file's end; compare piece by piece."""
    at = 0
    while at < len(got):
        piece = bytes(store.read_raw(start + at, len(got) - at))
        if got[at:at + len(piece)] != piece:
            return False
        at += len(piece)
    return True


def test_sync_master_sends_wait_for_the_acknowledgement_that_covers_them(tmp_path: Path) -> None:
    async def main() -> None:
        store, master = await started(tmp_path, BrokerRole.SYNC_MASTER)
        try:
            reader, writer = await slave_of(master)
            answers: list[tuple[int, bool]] = []
            ends = []
            for i in range(3):
                put(store, i)
                ends.append(store.max_physical_offset)
                assert master.replicate(ends[-1], lambda ok, i=i: answers.append((i, ok))) is None
            await read_frame(reader)
            writer.write(encode_report(ends[1]))
            await eventually(lambda: len(answers) == 2, 10, "the acknowledgement answering two sends")
            assert answers == [(0, True), (1, True)]
            writer.write(encode_report(ends[2]))
            await eventually(lambda: len(answers) == 3, 10, "the last send answered")
            assert answers[2] == (2, True)
            assert master.replicate(ends[2], lambda ok: answers.append((9, ok))) is PutStatus.PUT_OK
            writer.close()
        finally:
            await master.stop()
            store.shutdown()
    asyncio.run(main())


def test_a_slave_whose_connection_closed_leaves_the_caught_up_set_after_the_grace(tmp_path: Path) -> None:
    """Controller mode shrinks the SyncStateSet to `caught_up`: a killed slave (its connection
    closed) must leave it after HA_SLAVE_GONE_GRACE_S, not after haMaxTimeSlaveNotCatchup,
    while a connected slave that reported the end stays for the whole window."""
    async def main() -> None:
        store, master = await started(tmp_path, BrokerRole.SYNC_MASTER)
        try:
            reader, writer = await slave_of(master)
            (conn,) = master.connections
            conn.slave_id = 2
            put(store, 0)
            end = store.max_physical_offset
            await read_frame(reader)
            writer.write(encode_report(end))
            await eventually(lambda: master.caught_up(15.0) == {2}, 10, "the slave caught up")
            writer.close()
            await eventually(lambda: not master.connections, 10, "the connection closed")
            assert master.caught_up(15.0) == {2}, "left at once: a blip would shrink the set"
            await eventually(lambda: master.caught_up(15.0) == set(), 10 * HA_SLAVE_GONE_GRACE_S,
                             "the closed slave leaving after the grace")
        finally:
            await master.stop()
            store.shutdown()

    asyncio.run(main())
