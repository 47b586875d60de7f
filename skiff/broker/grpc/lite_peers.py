"""Lite topics across brokers, as RocketMQ 5.5 spreads them over a parent topic held by several
broker groups, with each lite topic kept on one broker.

**Where a lite topic lives.** 5.5 gives each lite topic one owner broker: the broker of the
parent's write queue number ``consistentHash(liteTopic.hashCode(), writeQueues)`` (the proxy's
``SendMessageQueueSelector`` sends a LITE message there; the broker's ``LiteShardingImpl``
computes the same owner), so one lite topic's messages sit in one queue, in order. Skiff's
brokers each serve gRPC themselves (the proxy's local mode), and the official clients send a
LITE message to any write queue of the parent (round robin), so the broker a message reaches
sends it on to the broker that keeps the lite topic (the same SendMessage with the client's
headers, so ACL 2.0 signs it alike), and answers with that broker's answer. The write queues
are those of the parent's route, sorted by broker name and queue id (the order the proxy's and
the clients' queue lists have).

**Ownership is sticky (unlike 5.5).** A broker that holds a lite topic (its queue has had a
message, and was not expired) keeps it: a message reaching it is stored there, whatever the
hash says. A broker that does not hold it asks the parent's other brokers whether one does (a
SendMessage marked as a question, answered without storing; a yes is remembered for
`LITE_ROUTE_CACHE_S`) and sends the message there; only a lite topic no broker holds is placed
by the hash, over a route read fresh from the NameServers for it. So a broker group joining the
parent (or brokers that saw different routes for a few seconds: a route is reused for
`LITE_ROUTE_CACHE_S`) never splits a lite topic over two brokers' queues: 5.5's hash moves some
lite topics' new messages to a new owner while their old ones wait on the former one. A message
that came forwarded is stored where it arrives, so no message passes back and forth; a forward
that fails stores the message here (as 5.5 falls back to the current broker when it has no
route): it is still received, since every broker has the subscriptions.

**Subscriptions on every broker.** The 5.5 proxy sends each SyncLiteSubscription to every broker
of the parent's route (``LiteSubscriptionService``); the clients sync with their access point
only. So the broker that takes a sync sends it on to the parent's other brokers (marked, so they
do not send it again), with the names as it read them (the Python client's split name put
together). A lite push consumer then receives from each broker its assignments name (one per
broker), and each serves it the lite topics it holds.

**A LiteSimpleConsumer** receives from the first broker of its route alone (both official clients
keep only that queue): that broker receives for it from the parent's other brokers what they hold
(`receive_elsewhere`, marked, without waiting), and sends the acks, changes of invisible time and
dead-letterings of those messages on to the broker their receipt handle names (`settle_elsewhere`).

**Reaching another broker.** At the gRPC endpoint it advertises (skiff.broker.grpc.routes: brokers
of one host serve gRPC on different ports), over TLS when this broker's gRPC door is
``enforcing`` (skiff.broker.grpc.tls.peer_credentials), plaintext otherwise. A broker whose
endpoint is this broker's own is never called.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import Any

import grpc

from skiff.broker.grpc.routes import BrokerQueues, Routes
from skiff.broker.grpc.status import status
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
HOLDS = "x-skiff-lite-holds"
"""The header of a SendMessage that asks whether the broker holds the message's lite topic
(answered OK or MESSAGE_NOT_FOUND, nothing stored)."""
CALL_METADATA: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar("grpc_call_metadata",
                                                                                           default=())
"""The headers of the gRPC call being served (set by the server for each unary call)."""
_NOT_FORWARDED = frozenset({"user-agent", "content-type", "te", "host"})
"""Headers grpcio sets itself on a call it makes."""

Holds = Callable[[str, str], bool]
"""Whether this broker holds lite topic (parent, lite): its queue has had a message."""


def forwarded() -> bool:
    """Whether the call being served came from another broker."""
    return any(key == FORWARDED for key, _ in CALL_METADATA.get())


def _asking() -> bool:
    """Whether the call being served asks whether this broker holds a lite topic."""
    return any(key == HOLDS for key, _ in CALL_METADATA.get())


def _outgoing(*extra: tuple[str, str]) -> tuple[tuple[str, Any], ...]:
    """The call's own headers (client id, signature) for a call on its behalf, marked forwarded."""
    kept = tuple((k, v) for k, v in CALL_METADATA.get()
                 if not k.startswith((":", "grpc-")) and k not in _NOT_FORWARDED and k != HOLDS)
    return (*kept, (FORWARDED, "1"), *extra)


class LitePeers:
    def __init__(self, routes: Routes, broker_name: str, clock: Clock, holds: Holds,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        """``credentials``: TLS to the other brokers' gRPC doors (None: plaintext)."""
        self.routes = routes
        self.broker_name = broker_name
        self.clock = clock
        self.holds = holds
        self.credentials = credentials
        self._routes: dict[str, tuple[float, list[BrokerQueues]]] = {}
        """parent -> (when looked up, its brokers): a send does not ask the NameServers each time."""
        self._held: dict[tuple[str, str], tuple[float, str]] = {}
        """(parent, lite) -> (when learnt, the other broker that holds it)."""
        self._held_purged = clock.monotonic()
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def _brokers(self, parent: str, fresh: bool = False) -> list[BrokerQueues]:
        cached = self._routes.get(parent)
        now = self.clock.monotonic()
        if not fresh and cached is not None and now - cached[0] < LITE_ROUTE_CACHE_S:
            return cached[1]
        brokers = await self.routes.brokers(parent)
        self._routes[parent] = (now, brokers)
        return brokers

    @staticmethod
    def hash_owner(lite: str, brokers: list[BrokerQueues]) -> BrokerQueues | None:
        """The broker 5.5 places lite topic ``lite`` on: its consistent hash over the write queues
        of ``brokers`` (the parent's route); None when the route has no write queue."""
        queues = sorted((b.broker_name, i, b) for b in brokers if b.perm & Perm.WRITE
                        for i in range(b.write_queue_nums))
        if not queues:
            return None
        return queues[consistent_hash(java_string_hash(lite), len(queues))][2]

    async def forward_send(self, msg: pb.Message) -> rpc.SendResultEntry | None:
        """The answer of the broker that keeps this LITE message's lite topic, when that is another
        broker; None: store it here (this broker holds it or is chosen for it, it came forwarded,
        or the chosen broker could not be reached). A question from another broker is answered here."""
        lite, parent = msg.system_properties.lite_topic, msg.topic.name
        if not lite:
            return None
        if _asking():
            held = self.holds(parent, lite)
            return rpc.SendResultEntry(status=status(pb.OK if held else pb.MESSAGE_NOT_FOUND,
                                                     "held here" if held else "not held here"))
        if forwarded() or self.holds(parent, lite):
            return None
        keeper = await self._keeper(parent, lite)
        if keeper is None or not self._other(keeper):
            return None
        try:
            answer = await self._call(keeper, "SendMessage", rpc.SendMessageRequest(messages=[msg]),
                                      rpc.SendMessageResponse)
        except grpc.RpcError as exc:
            log.warning("lite topic %s of %s: broker %s did not take it (%s); stored here", lite, parent,
                        keeper.broker_name, exc.code())
            return None
        return answer.entries[0] if answer.entries else rpc.SendResultEntry(status=answer.status)

    async def _keeper(self, parent: str, lite: str) -> BrokerQueues | None:
        """The broker a lite topic this broker does not hold goes to: another broker that holds it,
        else its hash owner by a route read now (a new lite topic)."""
        brokers = await self._brokers(parent)
        now = self.clock.monotonic()
        known = self._held.get((parent, lite))
        if known is not None and now - known[0] < LITE_ROUTE_CACHE_S:
            for b in brokers:
                if b.broker_name == known[1]:
                    return b
        holders = await self._holders(parent, lite, brokers)
        if not holders:
            asked = {b.broker_name for b in brokers}
            brokers = await self._brokers(parent, fresh=True)
            holders = await self._holders(parent, lite, [b for b in brokers if b.broker_name not in asked])
        owner = self.hash_owner(lite, brokers)
        if not holders:
            return owner
        keeper = owner if owner is not None and owner in holders else min(holders)
        self._remember(parent, lite, keeper.broker_name, now)
        return keeper

    async def _holders(self, parent: str, lite: str, brokers: list[BrokerQueues]) -> list[BrokerQueues]:
        """The brokers among ``brokers`` (other than this one) that say they hold the lite topic."""
        others = [b for b in brokers if self._other(b)]
        if not others:
            return []
        question = rpc.SendMessageRequest(messages=[pb.Message(
            topic=pb.Resource(name=parent), system_properties=pb.SystemProperties(lite_topic=lite,
                                                                                 message_type=pb.LITE))])
        answers = await asyncio.gather(*(self._call(b, "SendMessage", question, rpc.SendMessageResponse,
                                                    (HOLDS, "1")) for b in others), return_exceptions=True)
        held = []
        for b, answer in zip(others, answers):
            if isinstance(answer, BaseException):
                log.info("lite topic %s of %s: broker %s did not say whether it holds it: %s", lite, parent,
                         b.broker_name, answer)
            elif answer.status.code == pb.OK:
                held.append(b)
        return held

    def _remember(self, parent: str, lite: str, broker_name: str, now: float) -> None:
        if now - self._held_purged >= LITE_ROUTE_CACHE_S:  # forget what is stale (bounds the table)
            self._held = {k: v for k, v in self._held.items() if now - v[0] < LITE_ROUTE_CACHE_S}
            self._held_purged = now
        self._held[(parent, lite)] = (now, broker_name)

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
        """Up to ``want`` messages of the client's lite topics that the parent's other brokers hold,
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
        broker holds and this one received for its client, answered by that broker; None when the
        parent's route has no such broker."""
        if forwarded():
            return None
        for b in await self._brokers(parent):
            if b.broker_name == broker_name and self._other(b):
                return await self._call(b, method, request, reply)
        return None

    def _other(self, broker: BrokerQueues) -> bool:
        """Another broker this one can call: another group, at an endpoint other than this broker's
        own (a peer whose endpoint is not advertised yet is named at this broker's port)."""
        own = (self.routes.own_host, self.routes.grpc_port)
        return broker.broker_name != self.broker_name and (broker.host, broker.grpc_port) != own

    def _channel(self, broker: BrokerQueues) -> grpc.aio.Channel:
        host = f"[{broker.host}]" if ":" in broker.host else broker.host
        target = f"{host}:{broker.grpc_port}"
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = (grpc.aio.insecure_channel(target) if self.credentials is None
                                                else grpc.aio.secure_channel(target, self.credentials))
        return channel

    def _stream(self, broker: BrokerQueues, method: str, request: Any, reply: Any) -> Any:
        call = self._channel(broker).unary_stream(SERVICE_PATH + method,
                                                  request_serializer=type(request).SerializeToString,
                                                  response_deserializer=reply.FromString)
        return call(request, metadata=_outgoing(), timeout=LITE_FORWARD_TIMEOUT_S)

    async def _call(self, broker: BrokerQueues, method: str, request: Any, reply: Any,
                    *extra: tuple[str, str]) -> Any:
        call = self._channel(broker).unary_unary(SERVICE_PATH + method,
                                                 request_serializer=type(request).SerializeToString,
                                                 response_deserializer=reply.FromString)
        return await call(request, metadata=_outgoing(*extra), timeout=LITE_FORWARD_TIMEOUT_S)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
