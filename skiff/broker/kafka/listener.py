"""The Kafka listener: an asyncio server on ``kafkaListenPort`` that reads Kafka frames
and hands each request to the `KafkaService`.

Requests of one connection are served one at a time, in order, as Kafka's own broker
does (it mutes a connection while one of its requests is in progress): kafka-python and
aiokafka match each answer to their oldest request in flight and close the connection
on a mismatch, and a long-polled Fetch or a held JoinGroup may take seconds. Clients open
more connections where they need parallelism (librdkafka: one per broker and purpose).
A request that answers nothing (Produce with acks=0) writes nothing. Each connection has
its `Session` (SASL's state and the authenticated caller, `sasl.py`); a SASL failure
closes it after the answer.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from skiff.broker.kafka.sasl import Session
from skiff.broker.kafka.service import KafkaService
from skiff.common.errors import DecodeError
from skiff.common.limits import KAFKA_FAILED_AUTH_CLOSE_DELAY_MS, KAFKA_FRAME_MAX_BYTES
from skiff.transport.errors import ListenError
from skiff.transport.tls import ServerTls, SniffingListener, listen_socket

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_BACKLOG = 100
"""asyncio.start_server's default backlog, kept when TLS is served."""


class KafkaListener:
    def __init__(self, host: str, port: int, service: KafkaService, tls: ServerTls | None = None) -> None:
        """``tls``: the broker's TLS (its ``tls.*`` keys, docs/tls.md), served here by the same
        mode as on the remoting port: permissive takes TLS (SSL, SASL_SSL) and plaintext
        clients on this one port, told apart by their first byte (a Kafka frame's size
        cannot start with 0x16, a TLS handshake: that is over `KAFKA_FRAME_MAX_BYTES`);
        enforcing closes plaintext ones."""
        self.host = host
        self.port = port
        self.service = service
        self.tls = tls
        self._server: asyncio.Server | SniffingListener | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self.service.recover()
        try:
            if self.tls is None:
                self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
            else:
                self._server = SniffingListener(listen_socket(self.host, self.port, _BACKLOG), self.tls,
                                                self._protocol, lambda protocol: None)
        except OSError as exc:
            raise ListenError(f"the Kafka listener cannot listen on {self.host}:{self.port} "
                              f"(kafkaListenPort): {exc}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        self.service.start()

    async def stop(self) -> None:
        if self._server is None:
            return
        await self.service.stop()
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    def _protocol(self) -> asyncio.Protocol:
        """A connection's protocol, as `asyncio.start_server` makes it (for `SniffingListener`)."""
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        session = Session(writer.get_extra_info("peername") or ("?", 0))
        peer = session.peer
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 0 < size <= KAFKA_FRAME_MAX_BYTES:
                    log.warning("Kafka client %s sent a frame of %d bytes (at most %d): closing", peer, size,
                                KAFKA_FRAME_MAX_BYTES)
                    return
                frame = await reader.readexactly(size)
                try:
                    answer = await self.service.handle(frame, session)
                except DecodeError as exc:
                    log.warning("Kafka client %s sent a request that does not decode (%s): closing", peer, exc)
                    return
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
                if session.close:  # a SASL failure: Kafka closes after its answer, a moment later
                    await _drain_until_closed(reader, KAFKA_FAILED_AUTH_CLOSE_DELAY_MS / 1000)
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


async def _drain_until_closed(reader: asyncio.StreamReader, timeout_s: float) -> None:
    """Read (and drop) what the client still sends until it closes or ``timeout_s`` passes."""
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(1 << 16):
                pass
    except TimeoutError:
        pass
