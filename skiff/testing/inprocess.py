"""A real broker in this process, served through a connection without a socket.

For what a socket would hide: the request path's CPU per request (`skiff.bench.send_path`)
and the compiled path compared with the pure-Python one byte for byte on the same request
stream (tests/unit/broker/test_send_path_twins.py). Everything from the connection's
``data_received`` down to the store runs as a served connection runs it; only the
socket's reads and writes are replaced by `MemoryTransport`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from skiff.broker.config import BrokerConfig
from skiff.broker.server import BrokerServer
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder
from skiff.store.config import FlushDiskType, StoreConfig
from skiff.transport.connection import Connection


class MemoryTransport(asyncio.Transport):
    """A transport that keeps what is written (the answers), for a connection without a socket."""

    def __init__(self) -> None:
        super().__init__()
        self.out = bytearray()
        self.writes = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 10911)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: Any) -> None:
        self.out += data
        self.writes += 1

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.out += data
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


class ServedConnection:
    """One connection of an in-process broker: feed it reads, take the answers it wrote."""

    def __init__(self, broker: BrokerServer) -> None:
        self.broker = broker
        self.transport = MemoryTransport()
        remoting = broker._remoting  # the handlers the broker's own server serves
        assert remoting is not None, "the broker is not started"
        self.conn = Connection(remoting._handlers)
        self.conn.connection_made(self.transport)

    def feed(self, data: bytes) -> None:
        self.conn.data_received(data)

    async def wait_answers(self, count: int, timeout_s: float = 30.0) -> None:
        """Until ``count`` answers were written in all (loop steps, no sleep; SYNC_FLUSH answers
        come from the flusher's callbacks)."""
        deadline = time.monotonic() + timeout_s
        decoder, seen, pos = FrameDecoder(1 << 26), 0, 0
        while True:
            seen += len(decoder.feed(bytes(self.transport.out[pos:])))
            pos = len(self.transport.out)
            if seen >= count:
                return
            assert time.monotonic() < deadline, f"{seen} of {count} answers within {timeout_s} s"
            await asyncio.sleep(0)

    def answers(self) -> list[RemotingCommand]:
        """Every answer written so far, decoded."""
        return FrameDecoder(1 << 26).feed(bytes(self.transport.out))


@contextlib.asynccontextmanager
async def in_process_broker(root: str | Path, *, sync_flush: bool = False, clock: Clock = SYSTEM_CLOCK,
                            store: dict[str, Any] | None = None, **config: Any) -> AsyncIterator[BrokerServer]:
    """A started broker storing under ``root``: no NameServer, gRPC off, port 0 on 127.0.0.1;
    ``config``: more `BrokerConfig` fields, ``store``: more `StoreConfig` fields."""
    flush = FlushDiskType.SYNC_FLUSH if sync_flush else FlushDiskType.ASYNC_FLUSH
    broker = BrokerServer(BrokerConfig(listen_port=0, listen_host="127.0.0.1", grpc_server_port=0, **config),
                          StoreConfig(store_path_root_dir=str(root), flush_disk_type=flush,
                                      mapped_file_size_commit_log=64 << 20, **(store or {})), clock=clock)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
