"""The Kafka listener: an asyncio server on ``kafkaListenPort`` whose connections
(`KafkaConnection`) read Kafka frames and hand the requests to the `KafkaService`, answering
in request order (connection.py says how the requests of one read are served).
"""

from __future__ import annotations

import asyncio
import logging

from skiff.broker.kafka.connection import KafkaConnection
from skiff.broker.kafka.service import KafkaService
from skiff.transport.errors import ListenError
from skiff.transport.tls import ServerTls, SniffingListener, listen_socket

log = logging.getLogger(__name__)
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
        self._connections: set[KafkaConnection] = set()

    async def start(self) -> None:
        await self.service.recover()
        try:
            if self.tls is None:
                self._server = await asyncio.get_running_loop().create_server(self.connection, self.host, self.port,
                                                                              reuse_address=True)
            else:
                self._server = SniffingListener(listen_socket(self.host, self.port, _BACKLOG), self.tls,
                                                self.connection, lambda protocol: None)
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
        tasks = [c.task for c in self._connections if c.task is not None]
        for conn in list(self._connections):
            conn.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    def connection(self) -> KafkaConnection:
        """A new connection's protocol (for the server, `SniffingListener`, and
        `skiff.bench.kafka_path`'s in-memory connection)."""
        return KafkaConnection(self.service, self._connections)
