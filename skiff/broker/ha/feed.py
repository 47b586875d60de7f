"""A stream read by push: both ends of the HA connection handle each read in the
protocol's callback rather than in a task awaiting a `StreamReader`.

A task reading under a timeout pays, per read, a timer made and cancelled, a
future and a task wake-up; at one read per replication round (a report on the
master, a frame on the slave) that is a fixed cost per SYNC_MASTER send. With
`PushFeed` the reader's only wait is on `PushFeed.ended`, once per timeout
interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import SupportsIndex


class PushFeed(asyncio.StreamReader):
    """The stream's reader, made a push: each read goes to ``on_data`` in the protocol's
    callback instead of a buffer a task reads (what arrives before ``on_data`` is set
    waits for it). ``ended`` resolves with why the stream ended; ``last_read`` is the
    loop time of the last read. ``peer`` names the other end in that reason."""

    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer
        self.on_data: Callable[[bytes], None] | None = None
        self.early: list[bytes] = []
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.last_read = asyncio.get_running_loop().time()
        self.heard = False
        """Whether anything was read at all (a peer that closes at once may have refused us)."""

    def start(self, on_data: Callable[[bytes], None]) -> None:
        self.on_data = on_data
        early, self.early = self.early, []
        for data in early:
            on_data(data)

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        # StreamReader's signature; the protocol hands over bytes, which bytes() returns as is
        chunk = bytes(data)
        self.last_read = self._loop.time()  # type: ignore[attr-defined]
        self.heard = True
        if self.on_data is None:
            self.early.append(chunk)
        else:
            self.on_data(chunk)

    def feed_eof(self) -> None:
        self.end(f"{self.peer} closed the connection")

    def set_exception(self, exc: BaseException) -> None:
        self.end(f"read failed: {exc}")

    def end(self, why: str) -> None:
        """Resolve ``ended`` (first reason wins): also how ``on_data`` stops the reader."""
        if not self.ended.done():
            self.ended.set_result(why)
