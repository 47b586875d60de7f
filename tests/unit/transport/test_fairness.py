"""A connection with megabytes of requests queued does not keep the others waiting:
after a read that filled the receive buffer (`READ_TURN_BYTES`) it lets the others read."""

from __future__ import annotations

import socket
import threading

from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import encode_frame_bytes
from skiff.transport.connection import READ_TURN_BYTES, Connection

from ._support import ThreadedServer, connect, read_command

GATE, FLOOD, SMALL = 1, 2, 3
FLOOD_FRAMES = 24
FLOOD_BODY_BYTES = 256 * 1024
QUEUED_BYTES = 5 * 512 * 1024
"""What the flooding peer must have handed to the kernel before the server reads it."""


def test_a_flooding_peer_does_not_delay_another_peers_request():
    handled: list[str] = []
    flood_queued = threading.Event()
    connect_later: list[socket.socket] = []

    def gate(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """Hold the server's loop until 2.5 MiB of the flood are queued in the kernel."""
        assert flood_queued.wait(10), "the flooding peer could not queue its requests"
        return req.response()

    def flood(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        """The first flood request sends the small one: it arrives while the flood is being read."""
        if "flood" not in handled:
            connect_later[0].sendall(encode_frame_bytes(RemotingCommand(code=SMALL, opaque=1)))
        handled.append("flood")
        return req.response()

    def small_request(conn: Connection, req: RemotingCommand) -> RemotingCommand:
        handled.append("small")
        return req.response()

    server = ThreadedServer({GATE: gate, FLOOD: flood, SMALL: small_request})
    frame = encode_frame_bytes(RemotingCommand(code=FLOOD, opaque=1, body=bytes(FLOOD_BODY_BYTES)))
    assert len(frame) * 4 < QUEUED_BYTES and READ_TURN_BYTES < QUEUED_BYTES // 4
    try:
        with connect(server.port) as gatekeeper, connect(server.port) as flooder, connect(server.port) as other:
            connect_later.append(other)
            gatekeeper.sendall(encode_frame_bytes(RemotingCommand(code=GATE, opaque=1)))
            writer = threading.Thread(target=_flood, args=(flooder, frame * FLOOD_FRAMES, flood_queued))
            writer.start()
            assert read_command(gatekeeper).code == 0
            assert read_command(other).code == 0
            writer.join(30)
            assert not writer.is_alive()
            assert all(read_command(flooder).code == 0 for _ in range(FLOOD_FRAMES))
        assert handled.count("flood") == FLOOD_FRAMES
        flood_before = handled.index("small")
        turn = READ_TURN_BYTES // FLOOD_BODY_BYTES + 2  # a turn's reads, and a frame cut by the first read
        assert flood_before <= turn, f"{flood_before} flood requests were handled before the small one"
    finally:
        server.close()


def _flood(sock: socket.socket, data: bytes, queued: threading.Event) -> None:
    """Write the flood; open the gate once 2.5 MiB of it are queued."""
    view = memoryview(data)
    sent = 0
    while sent < len(data):
        sent += sock.send(view[sent : sent + 64 * 1024])
        if sent >= QUEUED_BYTES:
            queued.set()
    queued.set()
