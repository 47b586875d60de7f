"""gRPC benchmark: ``skiff bench grpc`` — produce, then receive and ack, over the broker's
RocketMQ 5.x endpoint (``apache.rocketmq.v2.MessagingService``).

Produce: ``--in-flight`` SendMessage calls outstanding for ``--seconds``, each with
``--batch`` messages of ``--size`` bytes (the official clients send one message per
call; the proxy takes several, which is the batched-equivalent load). Then receive:
``--in-flight`` ReceiveMessage calls of up to 32 messages, each answered by one
AckMessage with all their handles, until every produced message is acknowledged or
``--seconds`` pass. Prints rates and CPU per message (the client's, and the broker's
when the bench started it).

Without ``--endpoint`` it starts a broker of its own (child process, temporary
store, gRPC on a free port, served by ``--engine``: Skiff's own HTTP/2 door or grpcio's
server) and creates the topic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass

import grpc

from skiff.bench.producer import _ProcessCpu
from skiff.protocol.codes import RequestCode
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.transport.loop import run_coroutine

TOPIC = "BenchmarkGrpc"
GROUP = "BenchmarkGrpcGroup"
METHOD = "/apache.rocketmq.v2.MessagingService/"


@dataclass(frozen=True, slots=True)
class Figures:
    size_bytes: int
    batch: int
    in_flight: int
    produced: int
    produce_s: float
    produce_tps: float
    produce_client_cpu_us: float
    produce_broker_cpu_us: float | None
    received: int
    receive_s: float
    receive_ack_tps: float
    receive_client_cpu_us: float
    receive_broker_cpu_us: float | None
    """CPU microseconds per message: the bench's own, and the broker's when the bench started it."""


class Bench:
    def __init__(self, args: argparse.Namespace, broker_pid: int | None) -> None:
        self.args = args
        self.broker_cpu = _ProcessCpu(broker_pid)
        self.meta = (("x-mq-client-id", f"bench@{os.getpid()}@{uuid.uuid4().hex[:8]}"),)
        self.produced = 0
        self.received = 0

    def _connect(self) -> None:
        """The channel and calls, made on the running loop (grpc.aio binds them to it)."""
        self.channel = grpc.aio.insecure_channel(self.args.endpoint, options=[("grpc.max_send_message_length", -1),
                                                 ("grpc.max_receive_message_length", -1)])
        self.send = self.channel.unary_unary(METHOD + "SendMessage", rpc.SendMessageRequest.SerializeToString,
                                             rpc.SendMessageResponse.FromString)
        self.receive = self.channel.unary_stream(METHOD + "ReceiveMessage", rpc.ReceiveMessageRequest.SerializeToString,
                                                 rpc.ReceiveMessageResponse.FromString)
        self.ack = self.channel.unary_unary(METHOD + "AckMessage", rpc.AckMessageRequest.SerializeToString,
                                            rpc.AckMessageResponse.FromString)

    async def run(self) -> Figures:
        self._connect()
        produce = await self._phase(self._producer, lambda: self.produced)
        receive = await self._phase(self._consumer, lambda: self.received)
        await self.channel.close()
        return Figures(self.args.size, self.args.batch, self.args.in_flight, self.produced, *produce,
                       self.received, *receive)

    async def _phase(self, worker: Callable[[float], Awaitable[None]],
                     count: Callable[[], int]) -> tuple[float, float, float, float | None]:
        """Run ``in_flight`` workers for up to ``--seconds``: seconds, rate, CPU us per message."""
        cpu0, wall0 = time.process_time(), time.monotonic()
        self.broker_cpu.mark()
        await asyncio.gather(*(worker(wall0 + self.args.seconds) for _ in range(self.args.in_flight)))
        seconds, cpu, broker = time.monotonic() - wall0, time.process_time() - cpu0, self.broker_cpu.since_mark()
        n = max(1, count())
        return (round(seconds, 2), round(count() / seconds, 1), round(cpu * 1e6 / n, 2),
                None if broker is None else round(broker * 1e6 / n, 2))

    async def _producer(self, end: float) -> None:
        body = b"x" * self.args.size
        while time.monotonic() < end:
            messages = [pb.Message(topic=pb.Resource(name=self.args.topic), body=body,
                                   system_properties=pb.SystemProperties(message_id=uuid.uuid4().hex.upper(),
                                                                         body_encoding=pb.IDENTITY,
                                                                         message_type=pb.NORMAL))
                        for _ in range(self.args.batch)]
            reply = await self.send(rpc.SendMessageRequest(messages=messages), metadata=self.meta, timeout=10)
            if reply.status.code != pb.OK:
                raise SystemExit(f"send failed: {pb.Code.Name(reply.status.code)} {reply.status.message}")
            self.produced += len(messages)

    async def _consumer(self, end: float) -> None:
        request = rpc.ReceiveMessageRequest(group=pb.Resource(name=GROUP),
                                            message_queue=pb.MessageQueue(topic=pb.Resource(name=self.args.topic)),
                                            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                                            batch_size=32)
        request.invisible_duration.FromSeconds(60)
        request.long_polling_timeout.FromSeconds(1)
        while self.received < self.produced and time.monotonic() < end:
            entries = [rpc.AckMessageEntry(message_id=r.message.system_properties.message_id,
                                           receipt_handle=r.message.system_properties.receipt_handle)
                       async for r in self.receive(request, metadata=self.meta, timeout=10)
                       if r.WhichOneof("content") == "message"]
            if entries:
                await self.ack(rpc.AckMessageRequest(group=request.group, topic=request.message_queue.topic,
                                                     entries=entries), metadata=self.meta, timeout=10)
                self.received += len(entries)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="skiff bench grpc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", help="gRPC endpoint host:port of a running broker (default: start one here)")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    parser.add_argument("--batch", type=int, default=16, help="messages per SendMessage (default 16)")
    parser.add_argument("--in-flight", type=int, default=8, help="calls outstanding (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="for each phase (default 10)")
    parser.add_argument("--engine", choices=("skiff", "grpcio"), default="skiff",
                        help="the started broker's grpcServerEngine: Skiff's own HTTP/2 door (default) or grpcio's "
                             "server, to compare them")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args(argv)
    if args.size < 1 or args.batch < 1 or args.in_flight < 1:
        parser.error("--size, --batch and --in-flight must be at least 1")
    if args.endpoint:
        return _print(run_coroutine(Bench(args, None).run()), args)
    from skiff.testing.processes import free_port, start_broker
    from skiff.testing.wire import BrokerWire

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="skiff-bench-") as store, \
            start_broker(store, "", f"--grpcServerPort={port}", "--flushDiskType=ASYNC_FLUSH",
                         f"--grpcServerEngine={args.engine}") as broker:
        async def create() -> None:
            wire = BrokerWire(broker.addr)
            try:
                header = CreateTopicRequestHeader(args.topic, "TBW102", 8, 8, 6, "SINGLE_TAG")
                await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
            finally:
                await wire.close()
        run_coroutine(create())
        args.endpoint = f"127.0.0.1:{port}"
        return _print(run_coroutine(Bench(args, broker.pid).run()), args)


def _print(figures: Figures, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(asdict(figures)))
        return 0
    print(f"produce: {figures.produced:,} messages of {figures.size_bytes} B in {figures.produce_s} s "
          f"({figures.produce_tps:,.0f} msg/s, {figures.batch} per call, {figures.in_flight} in flight); CPU per "
          f"message: client {figures.produce_client_cpu_us} us, broker {figures.produce_broker_cpu_us} us")
    print(f"receive+ack: {figures.received:,} in {figures.receive_s} s ({figures.receive_ack_tps:,.0f} msg/s); CPU "
          f"per message: client {figures.receive_client_cpu_us} us, broker {figures.receive_broker_cpu_us} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
