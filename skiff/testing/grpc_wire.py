"""A protocol-level gRPC client of a broker's 5.x endpoint, for tests: the RPCs by name over
Skiff's own generated message classes, with the ``x-mq-client-id`` header the official
clients send. Like `skiff.testing.wire` for remoting, it hands back the raw responses so
tests assert on codes and messages, in this process, without the official client's venv.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

SERVICE = "/apache.rocketmq.v2.MessagingService/"
TIMEOUT_S = 10.0


class GrpcWire:
    """Calls to one endpoint (``host:port``) as one client id."""

    def __init__(self, endpoint: str, client_id: str = "skiff-test-client") -> None:
        self.channel = grpc.aio.insecure_channel(endpoint)
        self.metadata = (("x-mq-client-id", client_id),)

    async def close(self) -> None:
        await self.channel.close()

    async def unary(self, method: str, request: Any, response_type: Any) -> Any:
        call = self.channel.unary_unary(SERVICE + method, request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)
        return await call(request, metadata=self.metadata, timeout=TIMEOUT_S)

    async def stream(self, method: str, request: Any, response_type: Any) -> list[Any]:
        call = self.channel.unary_stream(SERVICE + method, request_serializer=type(request).SerializeToString,
                                         response_deserializer=response_type.FromString)
        return [r async for r in call(request, metadata=self.metadata, timeout=TIMEOUT_S)]

    async def send(self, topic: str, bodies: Sequence[bytes], *, message_ids: Sequence[str] = ()) -> Any:
        ids = list(message_ids) or [f"{i:032X}" for i in range(len(bodies))]
        messages = [pb.Message(topic=pb.Resource(name=topic), body=b, system_properties=pb.SystemProperties(
            message_id=i, message_type=pb.NORMAL, body_encoding=pb.IDENTITY)) for b, i in zip(bodies, ids)]
        return await self.unary("SendMessage", rpc.SendMessageRequest(messages=messages), rpc.SendMessageResponse)

    async def pull(self, group: str, topic: str, queue_id: int, offset: int = 0, *, batch: int = 32) -> list[Any]:
        mq = pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id)
        request = rpc.PullMessageRequest(group=pb.Resource(name=group), message_queue=mq, offset=offset,
                                         batch_size=batch, filter_expression=pb.FilterExpression(type=pb.TAG,
                                                                                                 expression="*"))
        return await self.stream("PullMessage", request, rpc.PullMessageResponse)

    async def receive(self, group: str, topic: str, *, batch: int = 32, wait_ms: int = 0, queue_id: int = -1,
                      invisible_ms: int = 30_000) -> list[Any]:
        request = rpc.ReceiveMessageRequest(
            group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id),
            batch_size=batch, filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"))
        request.invisible_duration.FromMilliseconds(invisible_ms)
        request.long_polling_timeout.FromMilliseconds(wait_ms)
        return await self.stream("ReceiveMessage", request, rpc.ReceiveMessageResponse)

    async def settings(self, settings: pb.Settings) -> Any:
        """Open a Telemetry stream, send the client's Settings and hand back the server's reply."""
        call = self.channel.stream_stream(SERVICE + "Telemetry",
                                          request_serializer=rpc.TelemetryCommand.SerializeToString,
                                          response_deserializer=rpc.TelemetryCommand.FromString)
        stream = call(metadata=self.metadata, timeout=TIMEOUT_S)
        await stream.write(rpc.TelemetryCommand(settings=settings))
        reply = await stream.read()
        stream.cancel()
        return reply

    async def ack(self, group: str, topic: str, receipt_handle: str) -> Any:
        entry = rpc.AckMessageEntry(message_id="0" * 32, receipt_handle=receipt_handle)
        return await self.unary("AckMessage", rpc.AckMessageRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=[entry]), rpc.AckMessageResponse)

    async def change_invisible(self, group: str, topic: str, receipt_handle: str, invisible_ms: int) -> Any:
        request = rpc.ChangeInvisibleDurationRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                     receipt_handle=receipt_handle, message_id="0" * 32)
        request.invisible_duration.FromMilliseconds(invisible_ms)
        return await self.unary("ChangeInvisibleDuration", request, rpc.ChangeInvisibleDurationResponse)


def first_status(responses: Sequence[Any]) -> pb.Status:
    """The status a streamed answer opens with."""
    return next(r.status for r in responses if r.HasField("status"))


def messages(responses: Sequence[Any]) -> list[Any]:
    """The messages of a streamed answer (ReceiveMessage's, PullMessage's)."""
    return [r.message for r in responses if r.HasField("message")]


async def receive_lite(consumers: Mapping[str, GrpcWire], group: str, parent: str, want: int,
                       deadline_s: float) -> list[tuple[str, str, str]]:
    """(consumer's name, lite topic, body) of what lite consumers of ``parent`` receive, each
    acknowledged with its lite topic (as the official clients ack), until ``want`` came or the
    deadline passed: the tests of lite topics across brokers read with it."""
    got: list[tuple[str, str, str]] = []
    end = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < end:
        for name, wire in consumers.items():
            for m in messages(await wire.receive(group, parent, wait_ms=500)):
                got.append((name, m.system_properties.lite_topic, m.body.decode()))
                entry = rpc.AckMessageEntry(message_id=m.system_properties.message_id,
                                            receipt_handle=m.system_properties.receipt_handle,
                                            lite_topic=m.system_properties.lite_topic)
                acked = await wire.unary("AckMessage", rpc.AckMessageRequest(
                    group=pb.Resource(name=group), topic=pb.Resource(name=parent), entries=[entry]),
                    rpc.AckMessageResponse)
                assert acked.status.code == pb.OK, acked.status.message
    return got
