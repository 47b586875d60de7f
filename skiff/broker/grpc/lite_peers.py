"""Lite topics across brokers, as RocketMQ 5.5 spreads them over a parent topic held by several
broker groups.

**Where a lite topic lives.** 5.5 gives each lite topic one owner broker: the broker of the
parent's write queue number ``consistentHash(liteTopic.hashCode(), writeQueues)`` (the proxy's
``SendMessageQueueSelector`` sends a LITE message there; the broker's ``LiteShardingImpl``
computes the same owner), so one lite topic's messages sit in one queue, in order. Skiff's
brokers each serve gRPC themselves (the proxy's local mode), and the official clients send a
LITE message to any write queue of the parent (round robin), so the broker a message reaches
forwards it to the owner's gRPC endpoint when it is not the owner (the same SendMessage with the
client's headers, so ACL 2.0 signs it alike), and answers with the owner's answer. The write
queues are those of the parent's route, sorted by broker name and queue id (the order the
proxy's and the clients' queue lists have). A forwarded message is marked and stored where it
arrives, so brokers that see different routes for a moment never pass a message back and
forth; a forward that fails stores the message here (as 5.5 falls back to the current broker
when it has no route): it is still received, since every broker has the subscriptions.

**Subscriptions on every broker.** The 5.5 proxy sends each SyncLiteSubscription to every broker
of the parent's route (``LiteSubscriptionService``); the clients sync with their access point
only. So the broker that takes a sync sends it on to the parent's other brokers (marked, so they
do not send it again), with the names as it read them (the Python client's split name put
together). A lite push consumer then receives from each broker its assignments name (one per
broker), and each serves it the lite topics it owns.

**A LiteSimpleConsumer** receives from the first broker of its route alone (both official clients
keep only that queue): that broker receives for it from the parent's other brokers what they own
(`receive_elsewhere`, marked, without waiting), and sends the acks, changes of invisible time and
dead-letterings of those messages on to the broker their receipt handle names (`settle_elsewhere`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import grpc

from skiff.broker.grpc.routes import BrokerQueues, Routes
from skiff.common.clock import Clock
from skiff.common.java_hash import consistent_hash, java_string_hash
from skiff.common.limits import LITE_FORWARD_TIMEOUT_S, LITE_ROUTE_CACHE_S
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

log = logging.getLogger(__name__)

SERVICE_PATH = "/apache.rocketmq.v2.MessagingService/"
FORWARDED = "x-skiff-lite-forwarded"
"""The header a broker puts on what it forwards to another: handle it here, send it on to none."""
CALL_METADATA: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar("grpc_call_metadata",
                                                                                           default=())
"""The headers of the gRPC call being served (set by the server for each unary call)."""
_NOT_FORWARDED = frozenset({"user-agent", "content-type", "te", "host"})
"""Headers grpcio sets itself on a call it makes."""


def forwarded() -> bool:
    """Whether the call being served came from another broker."""
    return any(key == FORWARDED for key, _ in CALL_METADATA.get())


def _outgoing() -> tuple[tuple[str, Any], ...]:
    """The call's own headers (client id, signature) for a call on its behalf, marked forwarded."""
    kept = tuple((k, v) for k, v in CALL_METADATA.get()
                 if not k.startswith((":", "grpc-")) and k not in _NOT_FORWARDED)
    return (*kept, (FORWARDED, "1"))


class LitePeers:
    def __init__(self, routes: Routes, broker_name: str, grpc_port: int, clock: Clock) -> None:
        self.routes = routes
        self.broker_name = broker_name
        self.grpc_port = grpc_port
        self.clock = clock
        self._routes: dict[str, tuple[float, list[BrokerQueues]]] = {}
        """parent -> (when looked up, its brokers): a send does not ask the NameServers each time."""
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def _brokers(self, parent: str) -> list[BrokerQueues]:
        cached = self._routes.get(parent)
        now = self.clock.monotonic()
        if cached is not None and now - cached[0] < LITE_ROUTE_CACHE_S:
            return cached[1]
        brokers = await self.routes.brokers(parent)
        self._routes[parent] = (now, brokers)
        return brokers

    async def owner(self, parent: str, lite: str) -> BrokerQueues | None:
        """The broker that owns lite topic ``lite`` of ``parent`` (5.5's consistent hash over the
        parent's write queues); None when the route has no write queue."""
        queues = sorted((b.broker_name, i, b) for b in await self._brokers(parent) if b.perm & Perm.WRITE
                        for i in range(b.write_queue_nums))
        if not queues:
            return None
        return queues[consistent_hash(java_string_hash(lite), len(queues))][2]

    async def forward_send(self, msg: pb.Message) -> rpc.SendResultEntry | None:
        """The owner's answer to a LITE message this broker does not own; None: store it here
        (this broker owns it, it came forwarded, or the owner could not be reached)."""
        lite = msg.system_properties.lite_topic
        if not lite or forwarded():
            return None
        owner = await self.owner(msg.topic.name, lite)
        if owner is None or not self._other(owner):
            return None
        try:
            answer = await self._call(owner, "SendMessage", rpc.SendMessageRequest(messages=[msg]),
                                      rpc.SendMessageResponse)
        except grpc.RpcError as exc:
            log.warning("lite topic %s of %s: its owner %s did not take it (%s); stored here", lite, msg.topic.name,
                        owner.broker_name, exc.code())
            return None
        return answer.entries[0] if answer.entries else rpc.SendResultEntry(status=answer.status)

    async def spread_sync(self, req: rpc.SyncLiteSubscriptionRequest, names: list[str]) -> None:
        """Send a sync this broker took on to the parent's other brokers (not one that came forwarded)."""
        if forwarded():
            return
        spread = rpc.SyncLiteSubscriptionRequest()
        spread.CopyFrom(req)
        del spread.lite_topic_set[:]
        spread.lite_topic_set.extend(names)
        others = [b for b in await self._brokers(req.topic.name) if self._other(b) and b.perm & Perm.READ]
        answers = await asyncio.gather(*(self._call(b, "SyncLiteSubscription", spread, rpc.SyncLiteSubscriptionResponse)
                                         for b in others), return_exceptions=True)
        for b, answer in zip(others, answers):
            failed = isinstance(answer, BaseException) or answer.status.code != pb.OK
            if failed:
                log.warning("lite subscription of %s not synced to %s: %s", req.group.name, b.broker_name,
                            answer if isinstance(answer, BaseException) else answer.status.message)

    async def receive_elsewhere(self, req: rpc.ReceiveMessageRequest, want: int) -> list[pb.Message]:
        """Up to ``want`` messages of the client's lite topics that the parent's other brokers own,
        received there for it without waiting (a LiteSimpleConsumer receives from one broker only)."""
        if forwarded() or want <= 0:
            return []
        ask = rpc.ReceiveMessageRequest()
        ask.CopyFrom(req)
        ask.long_polling_timeout.FromMilliseconds(0)
        got: list[pb.Message] = []
        for b in await self._brokers(req.message_queue.topic.name):
            if len(got) >= want or not self._other(b) or not b.perm & Perm.READ:
                continue
            ask.batch_size = want - len(got)
            try:
                async for answer in self._stream(b, "ReceiveMessage", ask, rpc.ReceiveMessageResponse):
                    if answer.HasField("message"):
                        got.append(answer.message)
            except grpc.RpcError as exc:
                log.info("lite receive from %s for %s failed: %s", b.broker_name, req.group.name, exc.code())
        return got

    async def settle_elsewhere(self, broker_name: str, parent: str, method: str, request: Any, reply: Any) -> Any:
        """``request`` (an ack, a change of invisible time, a dead-lettering) of a message another
        broker owns and this one received for its client, answered by that broker; None when the
        parent's route has no such broker."""
        if forwarded():
            return None
        for b in await self._brokers(parent):
            if b.broker_name == broker_name and self._other(b):
                return await self._call(b, method, request, reply)
        return None

    def _other(self, broker: BrokerQueues) -> bool:
        """Another broker this one can reach: brokers of one host (`skiff up --brokers 2`) serve gRPC on
        different ports, which routes do not know (skiff.broker.grpc.routes), so they are not asked."""
        return broker.broker_name != self.broker_name and broker.host != self.routes.own_host

    def _channel(self, broker: BrokerQueues) -> grpc.aio.Channel:
        target = f"[{broker.host}]:{self.grpc_port}" if ":" in broker.host else f"{broker.host}:{self.grpc_port}"
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = grpc.aio.insecure_channel(target)
        return channel

    def _stream(self, broker: BrokerQueues, method: str, request: Any, reply: Any) -> Any:
        call = self._channel(broker).unary_stream(SERVICE_PATH + method,
                                                  request_serializer=type(request).SerializeToString,
                                                  response_deserializer=reply.FromString)
        return call(request, metadata=_outgoing(), timeout=LITE_FORWARD_TIMEOUT_S)

    async def _call(self, broker: BrokerQueues, method: str, request: Any, reply: Any) -> Any:
        call = self._channel(broker).unary_unary(SERVICE_PATH + method, request_serializer=type(request).SerializeToString,
                                   response_deserializer=reply.FromString)
        return await call(request, metadata=_outgoing(), timeout=LITE_FORWARD_TIMEOUT_S)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
