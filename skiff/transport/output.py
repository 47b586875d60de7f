"""A connection's outgoing bytes, gathered so that many frames cost one write.

Frames written while a batch of incoming requests is being handled go out when
the batch ends; frames written from anywhere else go out at the end of the
current loop step. Small buffers (headers, small bodies) are copied together;
large ones, such as CommitLog slices of a pull answer, are passed to the
transport as they are, so a pull answer is never joined into one bytes object.
"""

from __future__ import annotations

import asyncio

from skiff.protocol.command import Buffer

FLUSH_BYTES = 64 * 1024
"""Gathered output is written at once when it reaches this size, so a large
batch of answers meets the transport's high-water mark (and pauses reading)
while it grows instead of after."""

COPY_MAX_BYTES = 4096
"""Buffers up to this size are copied into one run (a writev of hundreds of
tiny buffers costs more than the copy); larger ones are written as they are."""


class GatheredOutput:
    """Queued frames of one transport, written together."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._out: list[Buffer] = []
        self._small = bytearray()
        self._queued_bytes = 0
        self._held = False
        self._flush_handle: asyncio.Handle | None = None

    def hold(self) -> None:
        """Keep writes queued until `release` (while a batch of requests is handled)."""
        self._held = True

    def release(self) -> None:
        self._held = False
        self.flush()

    def write(self, frames: list[Buffer], at_once: bool = False) -> None:
        """Queue ``frames``; ``at_once``: write them now unless held."""
        for buf in frames:
            size = len(buf)
            self._queued_bytes += size
            if size <= COPY_MAX_BYTES:
                self._small += buf
            else:
                if self._small:
                    self._out.append(self._small)
                    self._small = bytearray()
                self._out.append(buf)
        if self._queued_bytes >= FLUSH_BYTES or (at_once and not self._held):
            self.flush()
        elif not self._held and self._flush_handle is None:
            self._flush_handle = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hand everything queued to the transport now (dropped if it is closing)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        small = self._small
        if not self._out:  # only small frames (a send's answers): one buffer, one write call
            if small:
                self._small, self._queued_bytes = bytearray(), 0
                if not self._transport.is_closing():
                    self._transport.write(small)
            return
        if small:
            self._out.append(small)
            self._small = bytearray()
        out, self._out, self._queued_bytes = self._out, [], 0
        if not self._transport.is_closing():
            self._transport.writelines(out)
