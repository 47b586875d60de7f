"""Single-message sends that arrive in one read are appended together per queue
(skiff.broker.operations.send_requests), and each is still answered as if alone: its own
queue offset and id, in arrival order per queue; a message the store refuses gets its
own refusal and the others are stored; under SYNC_FLUSH they share their fsyncs.

The requests are written to a raw socket in one write, as a producer with many sends in
flight delivers them.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, encode_frame_bytes
from skiff.protocol.message_codec import decode_stored_messages, send_properties
from skiff.testing.processes import start_broker
from skiff.testing.wire import BrokerWire, send_header, with_wire

MAX_BODY = 2048


def frames(sends: list[tuple[str, int, bytes]]) -> bytes:
    """SEND_MESSAGE_V2 requests, opaque = their position."""
    out = []
    for i, (topic, queue_id, body) in enumerate(sends):
        props = send_properties(Message.of(topic, body, keys=f"k{i}"), UNIQ_IDS.next_id())
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2,
                                      send_header(RequestCode.SEND_MESSAGE_V2, topic, queue_id, props), body)
        cmd.opaque = i
        out.append(encode_frame_bytes(cmd))
    return b"".join(out)


def exchange(addr: str, data: bytes, count: int, timeout_s: float = 15.0) -> dict[int, RemotingCommand]:
    """Write ``data`` in one go, read ``count`` answers (by opaque)."""
    host, port = addr.rsplit(":", 1)
    decoder, answers = FrameDecoder(1 << 24), {}
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + timeout_s
        while len(answers) < count:
            assert time.monotonic() < deadline, f"{len(answers)} of {count} answers within {timeout_s} s"
            chunk = sock.recv(1 << 16)
            assert chunk, "the broker closed the connection"
            answers.update((c.opaque, c) for c in decoder.feed(chunk))
    return answers


def runtime(addr: str) -> dict[str, str]:
    table: dict[str, str] = {}

    async def read(wire: BrokerWire) -> None:
        table.update(KVTable.from_json((await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table)
    with_wire(addr, read)
    return table


def test_sends_of_one_read_keep_their_own_answers_and_order(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, "", f"--maxMessageSize={MAX_BODY}")
    try:
        sends = [("Coalesced", i % 2, f"m{i}".encode()) for i in range(40)]
        sends[17] = ("Coalesced", 1, b"x" * (MAX_BODY + 1))  # refused by the store: only this one
        sends[23] = ("bad topic!", 0, b"y")  # refused by the gate: only this one
        answers = exchange(broker.addr, frames(sends), len(sends))
        assert answers[17].code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in answers[17].remark
        assert answers[23].code == ResponseCode.MESSAGE_ILLEGAL and "bad topic!" in answers[23].remark
        stored = {i: a for i, a in answers.items() if i not in (17, 23)}
        assert all(a.code == ResponseCode.SUCCESS for a in stored.values()), [a.remark for a in stored.values()]
        for queue_id in (0, 1):
            mine = [i for i in sorted(stored) if sends[i][1] == queue_id]
            assert [int(stored[i].ext("queueOffset")) for i in mine] == list(range(len(mine)))
            assert {stored[i].ext("queueId") for i in mine} == {str(queue_id)}

        async def read_back(wire: BrokerWire) -> None:
            for queue_id in (0, 1):
                mine = [i for i in sorted(stored) if sends[i][1] == queue_id]
                got = await wire.pull_messages("G-coalesced", "Coalesced", queue_id)
                assert [m.body for m in got] == [sends[i][2] for i in mine]
                assert [m.offset_msg_id for m in got] == [stored[i].ext("msgId") for i in mine]
        with_wire(broker.addr, read_back)
    finally:
        broker.stop()


def test_sync_flush_sends_of_one_read_share_their_fsyncs(tmp_path: Path) -> None:
    broker = start_broker(tmp_path, "", "--flushDiskType=SYNC_FLUSH")
    try:
        exchange(broker.addr, frames([("Durable", 0, b"warm-up")]), 1)
        before = int(runtime(broker.addr)["fsyncTotal"])
        sends = [("Durable", 0, f"d{i}".encode()) for i in range(64)]
        answers = exchange(broker.addr, frames(sends), len(sends))
        assert [int(answers[i].ext("queueOffset")) for i in range(64)] == list(range(1, 65))
        after = runtime(broker.addr)
        assert int(after["commitLogFlushedOffset"]) == int(after["commitLogMaxOffset"])  # answered once durable
        assert int(after["fsyncTotal"]) - before < 16, (before, after["fsyncTotal"])  # shared, not one each
    finally:
        broker.stop()
