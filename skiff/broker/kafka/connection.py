"""One Kafka client connection: frames split from each read, requests served in order,
answers written in request order.

Kafka clients match each answer to their oldest request in flight (kafka-python and aiokafka
close the connection on a mismatch), so answers leave in the order the requests came. What
a read brings is served in two ways:

- one-partition Produce requests (what librdkafka sends, one per partition batch; with
  ``linger.ms=0`` one per record) are read by `produce_wire.parse_produce` and handed to
  `KafkaService.produce_now` together, a run of them at a time: no task, no await, their
  batches appended together per queue and all their answers written in one write. An answer
  that waits for the flush (SYNC_FLUSH) or a slave (SYNC_MASTER) is a `LateAnswer` that
  takes its place in the answer order; requests after it are served meanwhile (they are
  independent appends, in the order they came);
- anything else goes through `KafkaService.handle` as a task, one at a time: the requests
  after it wait (reading paused) until it is answered, as Kafka's broker mutes a connection
  while one of its requests is in progress — a long-polled Fetch or a held JoinGroup may take
  seconds, and the requests after it must see what it did.

A request that answers nothing (Produce with acks=0) writes nothing. The connection has its
`Session` (SASL's state and the authenticated caller, `sasl.py`); a SASL failure closes it a
moment after the answer, dropping what the client still sends.
"""

from __future__ import annotations

import asyncio
import logging
import typing
from collections import deque

from skiff.broker.kafka.sasl import SaslState, Session
from skiff.broker.kafka.service import Answer, KafkaService
from skiff.common.errors import DecodeError
from skiff.common.limits import KAFKA_FAILED_AUTH_CLOSE_DELAY_MS, KAFKA_FRAME_MAX_BYTES
from skiff.protocol.kafka.frames import FrameSplitter, FrameTooLarge
from skiff.protocol.kafka.produce_wire import ProduceOne, parse_produce
from skiff.protocol.kafka.wire import Buffer

log = logging.getLogger(__name__)

Slot = list[bytes | list[Buffer] | None]
"""One answer's place in the answer order: [its frame (or its parts: a Fetch's)], [None] until
it is given."""


class KafkaConnection(asyncio.Protocol):
    def __init__(self, service: KafkaService, connections: set[KafkaConnection]) -> None:
        self.service = service
        self._connections = connections
        self.transport: asyncio.Transport | None = None
        self.session = Session(("?", 0))
        self._splitter = FrameSplitter(KAFKA_FRAME_MAX_BYTES)
        self._frames: deque[bytes] = deque()
        self._slots: deque[Slot] = deque()
        self.task: asyncio.Task[None] | None = None
        """The request being served by `KafkaService.handle` (None: none)."""
        self._serving = False
        self._write_due = False
        """A write of late answers is scheduled for the end of this loop step."""
        self._write_paused = False
        self._closing = False

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass
        peer = self.transport.get_extra_info("peername")
        self.session = Session(tuple(peer[:2]) if peer else ("?", 0))
        self._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._connections.discard(self)
        if self.task is not None:
            self.task.cancel()

    def pause_writing(self) -> None:
        """The socket's buffer is full: read no more requests until it drains."""
        self._write_paused = True
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self.transport is not None and self.task is None:
            self.transport.resume_reading()
        self._serve()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return  # closing after a SASL failure: what follows is dropped
        try:
            self._splitter.feed(data, self._frames)
        except FrameTooLarge as e:
            log.warning("Kafka client %s sent a frame of %d bytes (at most %d): closing", self.session.peer, e.size,
                        KAFKA_FRAME_MAX_BYTES)
            self.close()
            return
        self._serve()

    def close(self) -> None:
        self._closing = True
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.close()

    # -- serving -----------------------------------------------------------------------

    def _serve(self) -> None:
        """Serve the requests read, in order, until one is served as a task."""
        frames = self._frames
        if self.task is not None or self._write_paused or self._closing or not frames:
            return
        service, session = self.service, self.session
        self._serving = True
        try:
            while frames and self.task is None and not self._closing:
                if session.state is not SaslState.RAW and service.serves(session):
                    run: list[ProduceOne] = []
                    for frame in frames:
                        req = parse_produce(frame)
                        if req is None:
                            break
                        run.append(req)
                    if run:
                        answers, served = service.produce_now(run, session)
                        for _ in range(served):
                            frames.popleft()
                        for answer in answers:
                            self._owe(answer)
                        if served:
                            continue
                self._handle(frames.popleft())
        finally:
            self._serving = False
        self._write()

    def _owe(self, answer: Answer) -> None:
        if answer is None:
            return
        if isinstance(answer, bytes):
            self._slots.append([answer])
            return
        slot: Slot = [None]
        self._slots.append(slot)
        answer.then(self._given, slot)

    def _given(self, slot: Slot, frame: bytes) -> None:
        """A late answer: written with the others given in the same loop step (one fsync or
        slave acknowledgement answers many requests at once), in one write after them."""
        slot[0] = frame
        if not self._serving and not self._write_due:
            self._write_due = True
            asyncio.get_running_loop().call_soon(self._write)

    def _write(self) -> None:
        """Write the answers that are ready, up to the first that is not, in one write."""
        self._write_due = False
        slots, ready, parts = self._slots, [], False
        while slots and slots[0][0] is not None:
            frame = slots.popleft()[0]
            if isinstance(frame, list):
                ready += frame
                parts = True
            elif frame:
                ready.append(frame)
        if ready and self.transport is not None and not self.transport.is_closing():
            if parts:  # a Fetch's record batches: written as they are (uvloop: one writev), not joined
                self.transport.writelines(ready)
            else:
                self.transport.write(ready[0] if len(ready) == 1 else b"".join(ready))

    def _handle(self, frame: bytes) -> None:
        """``frame`` served by `KafkaService.handle` as a task; reading pauses until it is answered."""
        slot: Slot = [None]
        self._slots.append(slot)
        if self.transport is not None:
            self.transport.pause_reading()
        self.task = asyncio.get_running_loop().create_task(self._answer(frame, slot))

    async def _answer(self, frame: bytes, slot: Slot) -> None:
        session = self.session
        try:
            answer = await self.service.handle(frame, session)
        except DecodeError as exc:
            log.warning("Kafka client %s sent a request that does not decode (%s): closing", session.peer, exc)
            self.close()
            return
        except Exception:
            log.exception("Kafka request of %s failed: closing the connection", session.peer)
            self.close()
            return
        finally:
            self.task = None
        slot[0] = b"" if answer is None else answer  # b"": no answer, the place is skipped
        self._write()
        if session.close:  # a SASL failure: Kafka closes after its answer, a moment later
            self._closing = True
            if self.transport is not None:
                self.transport.resume_reading()  # what the client still sends is read and dropped
                asyncio.get_running_loop().call_later(KAFKA_FAILED_AUTH_CLOSE_DELAY_MS / 1000, self.transport.close)
            return
        if self.transport is not None and not self._write_paused and not self._closing:
            self.transport.resume_reading()
        self._serve()
