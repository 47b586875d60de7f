"""Our client's CPU per single send, in process: `AsyncProducer.send` against a canned broker.

A real `AsyncProducer` (its client instance, route cache, fault table, `RemotingClient` and
`Connection`s) sends ``--sends`` messages of ``--size`` bytes, ``--in-flight`` sends
outstanding, one message per SEND_MESSAGE_V2, as ``skiff bench producer --batch 1`` does. Its
connections have no socket: the loop's ``create_connection`` gives them a `CannedTransport`
whose peer answers what was written the loop step after it was written: a route of one broker
with 8 queues to GET_ROUTEINFO_BY_TOPIC, a send's answer as the broker encodes it (msgId,
queueId, queueOffset, MSG_REGION, TRACE_ON) to a send, SUCCESS to the rest. The answers of a
step arrive in reads of at most ``--per-read`` frames.

So the figure is our client's own CPU per send, from `AsyncProducer.send` through the
transport and the loop's wake-ups and back: no broker, no syscalls, no other process, and
little dependence on the machine's load (the peer's own time is measured and taken out).

    python -m skiff.bench.client_send --sends 20000 --in-flight 64
    valgrind --tool=callgrind --toggle-collect=functools_reduce --toggle-collect=_operator_call \
        python -m skiff.bench.client_send --sends 4000 --repeat 1

``--batch N`` (N > 1) sends batches instead, as the compare's Skiff producer does
(`AsyncProducer.send_batch` of N fresh `Message` objects per call, one SEND_BATCH_MESSAGE each):

    python -m skiff.bench.client_send --batch 256 --in-flight 8 --sends 200 --warmup 20

It prints process-CPU µs per send (and per message), the fastest of ``--repeat`` rounds with the peer's time
taken out, and checks that every send was answered SEND_OK. Under callgrind, with the two
``--toggle-collect`` options above, only the client's instructions in the measured rounds are
counted: those rounds run inside C's ``functools_reduce``, and the peer's work there inside C's
``_operator_call``, which toggles counting off again until it returns.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any

from skiff.client.producer import AsyncProducer
from skiff.client.results import SendStatus
from skiff.common.limits import BATCH_MAX_MESSAGES
from skiff.common.message import Message
from skiff.protocol.bodies.route import BrokerData, QueueData, TopicRouteData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.frame import FrameDecoder, answer_frame, encode_frame_bytes
from skiff.protocol.headers.send import SendMessageRequestHeaderV2
from skiff.transport.loop import loop_factory

TOPIC = "ClientSendBench"
BROKER = "broker-a"
BROKER_ADDR = "127.0.0.1:10911"
QUEUES = 8
_QUEUE_ID = SendMessageRequestHeaderV2.WIRE_NAMES["queue_id"]
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_ROUTE = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
_ROUTE_BODY = TopicRouteData((QueueData(BROKER, QUEUES, QUEUES, 6),),
                             (BrokerData("DefaultCluster", BROKER, {0: BROKER_ADDR}),)).to_json()
_EXTRA = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


class CannedPeer:
    """Answers every request frame written to it; counts the sends and the time it spends."""

    def __init__(self) -> None:
        self.sends = 0
        self.cpu_s = 0.0
        self.measuring = False
        """Set during the measured rounds: the peer's work then runs inside C's ``_operator_call``
        (nothing else calls it), which callgrind's ``--toggle-collect=_operator_call`` turns counting
        off for."""

    def answers(self, decoder: FrameDecoder, data: bytes) -> list[bytes]:
        started = time.process_time()
        if self.measuring:
            out: list[bytes] = operator.call(self._answers, decoder, data)
        else:
            out = self._answers(decoder, data)
        self.cpu_s += time.process_time() - started
        return out

    def _answers(self, decoder: FrameDecoder, data: bytes) -> list[bytes]:
        return [self._answer(cmd) for cmd in decoder.feed(data)]

    def _answer(self, cmd: RemotingCommand) -> bytes:
        if cmd.code == _SEND_V2 or cmd.code == _SEND_BATCH:
            self.sends += 1
            ext = {"msgId": f"7F00000100002A9F{self.sends:016X}", "queueId": (cmd.ext_fields or {})[_QUEUE_ID],
                   "queueOffset": str(self.sends), **_EXTRA}
            return answer_frame(cmd, ResponseCode.SUCCESS, None, ext)
        if cmd.code == _ROUTE:
            return _with_body(cmd, _ROUTE_BODY)
        return answer_frame(cmd, ResponseCode.SUCCESS, None, {})


def _with_body(cmd: RemotingCommand, body: bytes) -> bytes:
    return encode_frame_bytes(cmd.response(body=body))


class CannedTransport(asyncio.Transport):
    """A connection's transport without a socket: what is written is answered by the peer
    one loop step later, in reads of at most ``per_read`` frames."""

    def __init__(self, protocol: asyncio.Protocol, peer: CannedPeer, loop: asyncio.AbstractEventLoop,
                 per_read: int) -> None:
        super().__init__()
        self._protocol = protocol
        self._peer = peer
        self._loop = loop
        self._per_read = per_read
        self._decoder = FrameDecoder()
        self._inbox = bytearray()
        self._scheduled = False
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 10911), "sockname": ("127.0.0.1", 40000)}.get(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: Any) -> None:
        self._inbox += data
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._deliver)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def _deliver(self) -> None:
        self._scheduled = False
        data, self._inbox = bytes(self._inbox), bytearray()
        answers = self._peer.answers(self._decoder, data)
        for i in range(0, len(answers), self._per_read):
            if self._closing:
                return
            self._protocol.data_received(b"".join(answers[i:i + self._per_read]))

    def is_closing(self) -> bool:
        return self._closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._loop.call_soon(self._protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()


def canned_loop(peer: CannedPeer, per_read: int) -> asyncio.AbstractEventLoop:
    """The product's loop (uvloop where installed) whose ``create_connection`` dials the peer."""
    base: Any = type(loop_factory()())

    class CannedLoop(base):  # the loop class is chosen at run time
        async def create_connection(self, protocol_factory: Callable[[], asyncio.Protocol], host: str | None = None,
                                    port: int | None = None, **_: Any) -> tuple[asyncio.Transport, asyncio.Protocol]:
            protocol = protocol_factory()
            transport = CannedTransport(protocol, peer, self, per_read)
            protocol.connection_made(transport)
            return transport, protocol

    return CannedLoop()


async def sends(producer: AsyncProducer, bodies: list[bytes], count: int, in_flight: int) -> int:
    """Make ``count`` sends with ``in_flight`` outstanding; how many were not SEND_OK. One body:
    `AsyncProducer.send` of one message; more: `send_batch` of fresh messages, as the compare's driver."""
    left = count
    bad = 0
    single = Message.of(TOPIC, bodies[0]) if len(bodies) == 1 else None

    async def worker() -> None:
        nonlocal left, bad
        while left > 0:
            left -= 1
            if single is not None:
                result = await producer.send(single)
            else:
                (result,) = await producer.send_batch([Message(TOPIC, body) for body in bodies])
            if result.send_status is not SendStatus.SEND_OK:
                bad += 1

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return bad


def run(args: argparse.Namespace) -> dict[str, Any]:
    peer = CannedPeer()
    loop = canned_loop(peer, args.per_read)
    bodies = [i.to_bytes(8, "big") + bytes(args.size - 8) for i in range(args.batch)]
    rounds: list[float] = []
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        producer = AsyncProducer("ClientSendBench", "127.0.0.1:9876", instance_name="client-send-bench", trace=False)
        runner.run(producer.start())
        assert runner.run(sends(producer, bodies, args.warmup, args.in_flight)) == 0

        def measured_round(_: object, __: object) -> None:
            peer_cpu_s, started = peer.cpu_s, time.process_time()
            peer.measuring = True
            bad = runner.run(sends(producer, bodies, args.sends, args.in_flight))
            peer.measuring = False
            assert bad == 0, f"{bad} sends were not SEND_OK"
            rounds.append(time.process_time() - started - (peer.cpu_s - peer_cpu_s))

        # inside C's functools_reduce, so that callgrind can count the rounds alone
        functools.reduce(measured_round, range(args.repeat), None)
        runner.run(producer.shutdown())
    assert peer.sends == args.warmup + args.sends * args.repeat, f"the peer answered {peer.sends} sends"
    return {"sends": args.sends, "batch": args.batch, "in_flight": args.in_flight, "per_read": args.per_read,
            "size": args.size, "client_cpu_us_per_send": round(min(rounds) / args.sends * 1e6, 2),
            "client_cpu_us_per_message": round(min(rounds) / (args.sends * args.batch) * 1e6, 3),
            "rounds_us_per_send": [round(r / args.sends * 1e6, 2) for r in rounds]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench client_send", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=20_000, help="sends per measured round")
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the fastest is reported)")
    parser.add_argument("--in-flight", type=int, default=64, help="sends outstanding")
    parser.add_argument("--per-read", type=int, default=64, help="answers per read at most")
    parser.add_argument("--size", type=int, default=100, help="body bytes (at least 8)")
    parser.add_argument("--batch", type=int, default=1, help="messages per send (1: send, more: send_batch)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if min(args.sends, args.repeat, args.in_flight, args.per_read, args.batch) < 1 or args.warmup < 0 or args.size < 8:
        parser.error("--sends, --repeat, --in-flight, --per-read and --batch must be at least 1, --size at least 8")
    if args.batch > BATCH_MAX_MESSAGES:
        parser.error(f"--batch is at most {BATCH_MAX_MESSAGES} (one send)")
    figures = run(args)
    print(json.dumps(figures) if args.json else " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
