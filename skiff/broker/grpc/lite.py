"""Lite topics (RocketMQ 5.5, RIP-83) on the gRPC endpoint: LITE sends, SyncLiteSubscription,
the lite part of a consumer's Settings, and receives of LitePushConsumer and LiteSimpleConsumer.

A lite topic is a child name under a parent topic whose ``message.type`` is LITE. RocketMQ 5.5
keeps each one as a light message queue ``%LMQ%$<parent>$<lite>`` of one queue (no retry topic),
and pops the client's subscribed LMQs in order (``PopLiteMessageProcessor``: one un-acknowledged
batch per LMQ and group at a time, redelivered after its invisible time). Skiff does the same
with a topic of its own per lite topic, ``%LMQ%|<parent>|<lite>`` (one queue, read and write,
made on the first send or subscription), since the POP machinery (cursors, orderly batches,
redelivery, the DLQ after ``retryMaxTimes``) works on topics: each lite topic keeps its own
offset per group and its own order, and a message of one lite topic never waits behind
another's. ``|`` stands for RocketMQ's ``$``, which Skiff's topic names do not take; a lite
name may not hold ``|`` (``^[a-zA-Z0-9_-]+$``, as the proxy checks), so the last ``|`` of the
name splits it. Storing lite topics as queues of the parent keyed by name was the other
choice: there, a group's cursor over a parent queue would skip the messages of lite topics
its clients had not subscribed (yet) and FIFO would hold per queue, not per lite topic.

Subscriptions are kept per client in memory, as the 5.5 broker keeps them (the clients send
their whole set again every 30 s): PARTIAL_ADD/PARTIAL_REMOVE change it, COMPLETE_ADD replaces
it, COMPLETE_REMOVE and NotifyClientTermination drop it. A group with the attribute
``lite.sub.wildcard`` is a wildcard group (5.5, apache/rocketmq#10203): a COMPLETE_ADD from its
client subscribes it to every lite topic of the parent, those of the future included, shared
by the group's clients; PARTIAL_ADD is refused for it. ``lite.bind.topic``, when the group has
it, must name the request's topic; ``lite.sub.client.quota`` (default 2000) goes to the
clients' Settings as ``lite_subscription_quota`` (the 5.x clients refuse every subscribe while
it is 0). ``lite.sub.model=Exclusive`` serves a lite topic to the client that added it last
(`LiteTopics._exclusive`); a PARTIAL_ADD's ``offset_option`` moves where the group reads it
(`LiteTopics._reset_offset`). ``lite.sub.client.max.event.cnt`` (5.5: the capacity of a client's
queue of lite topics with messages ready for it, 10 or more, default 400; lite topics beyond it go
to the group's other clients or wait) bounds how many lite topics one client holds un-acknowledged
batches of at once (`LiteTopics._room`): Skiff hands lite topics out as clients receive, with no
queue per client, so the rest wait for the group's other clients or for this one's acks. Idle lite
topics and silent clients' subscriptions expire (skiff.broker.grpc.lite_expiry); a parent on
several brokers keeps each lite topic on one and syncs subscriptions to all
(skiff.broker.grpc.lite_peers).

The official Python client 5.1.2 sends ``subscribe_lite("abc")`` as a PARTIAL_ADD of
``["a", "b", "c"]`` (it extends the set with the string) until its 30 s COMPLETE_ADD. A
PARTIAL_ADD of several one-character names from a Python client is that defect (the client
adds one name per call) and is read as the one name they spell, so its messages flow at once.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.clients import GrpcClientConn, GrpcClients
from skiff.broker.grpc.convert import Invalid, now_timestamp, to_message
from skiff.broker.grpc.lite_peers import LitePeers, forwarded
from skiff.broker.grpc.renewal import Renewals
from skiff.broker.grpc.status import refused, status
from skiff.broker.operations import ANY_QUEUE, GroupsOperation, Refusal
from skiff.broker.operations.pop import PopOperation, PopRequest
from skiff.broker.pop.service import Popped
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.limits import (
    LITE_CLIENT_EVENTS_DEFAULT,
    LITE_SUBSCRIPTION_QUOTA_DEFAULT,
    LITE_SUBSCRIPTION_QUOTA_MARGIN,
    LITE_TOPIC_MAX_BYTES,
    LITE_WAKE_MAX_S,
    POP_MAX_MSG_NUMS,
    TOPIC_MAX_CHARS,
)
from skiff.common.stored_message import decode_record
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.group_attributes import (
    BIND_TOPIC,
    CLIENT_QUOTA,
    MAX_EVENT_COUNT,
    RESET_OFFSET_EXCLUSIVE,
    RESET_OFFSET_UNSUBSCRIBE,
    SUB_MODEL,
    WILDCARD,
)
from skiff.protocol.bodies.topic_attributes import TopicMessageType, message_type
from skiff.protocol.codes import ResponseCode
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc

LMQ_PREFIX = "%LMQ%|"
SEPARATOR = "|"
LITE_CLIENT_TYPES = frozenset({pb.LITE_PUSH_CONSUMER, pb.LITE_SIMPLE_CONSUMER})
FROM_START = pb.OffsetOption(policy=pb.OffsetOption.MIN)
_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def lmq_name(parent: str, lite: str) -> str:
    """The topic holding lite topic ``lite`` of ``parent``."""
    return f"{LMQ_PREFIX}{parent}{SEPARATOR}{lite}"


def parent_and_lite(topic: str) -> tuple[str, str] | None:
    """(parent, lite name) of a lite topic's store topic; None for any other topic."""
    if not topic.startswith(LMQ_PREFIX):
        return None
    parent, sep, lite = topic[len(LMQ_PREFIX):].rpartition(SEPARATOR)
    return (parent, lite) if sep and parent and lite else None


def group_attribute(group: SubscriptionGroupConfig | None, name: str) -> str | None:
    """A group attribute (``+name`` too: how Skiff kept them before it applied patches)."""
    if group is None:
        return None
    value = group.attributes.get(name)
    return group.attributes.get("+" + name) if value is None else value


def lite_error(parent: str, lite: str) -> str | None:
    """Why ``lite`` cannot be a lite topic of ``parent`` (ILLEGAL_LITE_TOPIC), or None."""
    if not _NAME.match(lite):
        return f"the lite topic {lite!r} is empty or has characters other than letters, digits, '_' and '-'"
    if len(lite.encode()) > LITE_TOPIC_MAX_BYTES:
        return f"the lite topic {lite!r} is longer than {LITE_TOPIC_MAX_BYTES} bytes"
    if len(lmq_name(parent, lite)) > TOPIC_MAX_CHARS:
        return (f"the lite topic {lite!r} of {parent} makes a queue name longer than {TOPIC_MAX_CHARS} characters "
                f"({LMQ_PREFIX}<parent>{SEPARATOR}<lite>)")
    return None


@dataclass
class LiteSubscription:
    """What one lite client receives: its group, the parent (bind) topic and its lite topics."""

    group: str
    parent: str
    names: set[str] = field(default_factory=set)
    wildcard: bool = False
    """Every lite topic of the parent (a COMPLETE_ADD of a ``lite.sub.wildcard`` group)."""
    version: int = -1
    synced_ms: int = 0
    """When the client last synced it (a subscription not synced for long goes: lite_expiry)."""
    evicted: set[str] = field(default_factory=set)
    """Lite topics another client of an Exclusive group took (5.5's eviction tombstones): not served
    to this client, though its complete syncs name them, until it adds them again one by one."""


class LiteTopics:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, groups: GroupsOperation,
                 clients: GrpcClients, pop: PopOperation, renewals: Renewals, clock: Clock) -> None:
        """``groups``: the group a lite client names is made on first sight (`GroupsOperation.ensure`),
        as a 5.x consumer's Settings and the remoting heartbeat make theirs."""
        self.config = config
        self.topics = topics
        self.groups = groups
        self.clients = clients
        self.pop = pop
        self.renewals = renewals
        self.clock = clock
        self.subscriptions: dict[str, LiteSubscription] = {}
        """client id -> its lite subscription."""
        self._arrivals: dict[str, asyncio.Event] = {}
        """parent -> set when one of its lite topics got a message or settled one (wakes receives)."""
        self.peers: LitePeers | None = None
        """The parent's other brokers (the server sets it): lite topics' owners, subscriptions synced to all."""
        self._taken: dict[str, set[str]] = {}
        """client id -> the lite topics (store topics) it popped a batch of that may not be settled yet."""

    # -- who is lite ----------------------------------------------------------------------------

    def is_lite_client(self, conn: GrpcClientConn) -> bool:
        settings = self.clients.settings.get(conn.client_id)
        return settings is not None and settings.client_type in LITE_CLIENT_TYPES

    def receives_lite(self, conn: GrpcClientConn) -> bool:
        """Whether a receive is a lite consumer's: its Settings say so, or another broker asks for
        one of its lite clients (`LitePeers.receive_elsewhere`; the client never talked to this one)."""
        return self.is_lite_client(conn) or (forwarded() and conn.client_id in self.subscriptions)

    def _aggregates(self, conn: GrpcClientConn) -> bool:
        """A LiteSimpleConsumer receives from the first broker of its route alone: that broker
        receives for it what the parent's other brokers own."""
        settings = self.clients.settings.get(conn.client_id)
        return self.peers is not None and settings is not None and settings.client_type == pb.LITE_SIMPLE_CONSUMER

    def is_parent(self, topic: str) -> bool:
        tc = self.topics.get(topic)
        return tc is not None and message_type(tc.attributes) is TopicMessageType.LITE

    def holds(self, parent: str, lite: str) -> bool:
        """Whether this broker holds lite topic ``lite`` of ``parent``: its queue has had a message
        (one made by a subscription alone does not count) and was not expired since."""
        return self.pop.service.store.get_max_offset(lmq_name(parent, lite), 0) > 0

    def max_events(self, group_name: str) -> int:
        """The group's ``lite.sub.client.max.event.cnt`` (at least 10, as 5.5 takes it), else 5.5's default."""
        text = group_attribute(self.groups.ensure(group_name), MAX_EVENT_COUNT)
        try:
            return max(10, int(text)) if text is not None else LITE_CLIENT_EVENTS_DEFAULT
        except ValueError:
            return LITE_CLIENT_EVENTS_DEFAULT

    def quota(self, group_name: str) -> int:
        """The group's ``lite.sub.client.quota`` (-1: no limit), else 2000, 5.5's default."""
        text = group_attribute(self.groups.ensure(group_name), CLIENT_QUOTA)
        try:
            return int(text) if text is not None else LITE_SUBSCRIPTION_QUOTA_DEFAULT
        except ValueError:
            return LITE_SUBSCRIPTION_QUOTA_DEFAULT

    def settings(self, settings: pb.Settings) -> None:
        """Add the lite limits to a lite client's Settings reply: the 5.x clients refuse every
        subscribe while ``lite_subscription_quota`` is 0, which it is when left out. A lite push
        consumer is a FIFO consumer (the Java client forces it; the Python 5.1.2 client reads the
        flag), as lite topics are served: one batch of a lite topic at a time, in order."""
        if settings.client_type not in LITE_CLIENT_TYPES or not settings.HasField("subscription"):
            return
        if settings.client_type == pb.LITE_PUSH_CONSUMER:
            settings.subscription.fifo = True
        quota = self.quota(settings.subscription.group.name)
        # no limit (-1) as the largest int32: the Python client compares its set size + 1 with it
        settings.subscription.lite_subscription_quota = quota if quota >= 0 else 2 ** 31 - 1
        settings.subscription.max_lite_topic_size = LITE_TOPIC_MAX_BYTES

    # -- sending --------------------------------------------------------------------------------

    def store_topic(self, msg: pb.Message) -> str:
        """The topic a LITE message is stored in (made on its first message); `Invalid` when the
        proxy would refuse it."""
        parent, lite = msg.topic.name, msg.system_properties.lite_topic
        sp = msg.system_properties
        if sp.HasField("message_group") or sp.HasField("delivery_timestamp") or sp.HasField("priority"):
            raise Invalid(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "a lite message has no message group, delivery "
                                                                  "time or priority")
        why = lite_error(parent, lite)
        if why is not None:
            raise Invalid(pb.ILLEGAL_LITE_TOPIC, why)
        tc = self.topics.get(parent)
        if tc is None:
            raise Invalid(pb.TOPIC_NOT_FOUND, f"topic {parent} not found")
        if self.config.enable_topic_message_type_check and message_type(tc.attributes) is not TopicMessageType.LITE:
            raise Invalid(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                          f"the topic {parent} takes no LITE messages: its message.type is not LITE")
        return self._lmq(parent, lite)

    def _lmq(self, parent: str, lite: str) -> str:
        name = lmq_name(parent, lite)
        self.topics.find_or_create(name, 1)
        return name

    def arrived(self, parent: str) -> None:
        """Something changed in ``parent``'s lite topics (a message stored, one settled): wake
        the receives waiting on it."""
        event = self._arrivals.pop(parent, None)
        if event is not None:
            event.set()

    # -- settling ---------------------------------------------------------------------------------

    def settle_topic(self, topic: str, lite: str) -> str:
        """The topic an ack, change of invisible time or dead-lettering names: a lite message's
        own (the clients send its ``lite_topic`` with the parent), else ``topic`` itself."""
        if not lite:
            return topic
        self.arrived(topic)  # an ack frees the lite topic's batch: its next messages may go
        return lmq_name(topic, lite)

    # -- subscriptions ----------------------------------------------------------------------------

    async def sync_everywhere(self, conn: GrpcClientConn,
                              req: rpc.SyncLiteSubscriptionRequest) -> rpc.SyncLiteSubscriptionResponse:
        """`sync` here, then on the parent's other brokers (`LitePeers.spread_sync`), as the 5.5 proxy
        syncs every broker of the parent's route."""
        answer = self.sync(conn, req)
        if answer.status.code == pb.OK and self.peers is not None:
            await self.peers.spread_sync(req, self._names(conn, req))
        return answer

    def sync(self, conn: GrpcClientConn, req: rpc.SyncLiteSubscriptionRequest) -> rpc.SyncLiteSubscriptionResponse:
        def answer(code: int, message: str = "") -> rpc.SyncLiteSubscriptionResponse:
            return rpc.SyncLiteSubscriptionResponse(status=status(code, message))

        parent, group_name = req.topic.name, req.group.name
        if not group_name:
            return answer(pb.ILLEGAL_CONSUMER_GROUP, "no consumer group")
        if self.topics.get(parent) is None:
            return answer(pb.TOPIC_NOT_FOUND, f"topic {parent} not found")
        if not self.is_parent(parent):
            return answer(pb.ILLEGAL_TOPIC, f"the topic {parent} is not a lite parent topic (message.type LITE)")
        group = self.groups.ensure(group_name)
        if group is None:
            return answer(pb.CONSUMER_GROUP_NOT_FOUND, f"consumer group {group_name} not found")
        bound = group_attribute(group, BIND_TOPIC)
        if bound is not None and bound != parent:
            return answer(pb.ILLEGAL_TOPIC, f"the group {group_name} is bound to the topic {bound}, not {parent}")
        adding = req.action in (pb.PARTIAL_ADD, pb.COMPLETE_ADD)
        if adding and not group.consume_enable:
            return answer(pb.FORBIDDEN, f"the group {group_name} may not consume (consumeEnable false)")
        names = self._names(conn, req)
        wildcard = group_attribute(group, WILDCARD) == "true"
        if req.action == pb.PARTIAL_ADD and wildcard:
            return answer(pb.BAD_REQUEST, f"the group {group_name} is a wildcard group (lite.sub.wildcard): it "
                                          f"subscribes every lite topic of {parent} with a complete add, not one by one")
        if adding and not wildcard:
            for name in names:
                why = lite_error(parent, name)
                if why is not None:
                    return answer(pb.ILLEGAL_LITE_TOPIC, why)
        sub = self.subscriptions.get(conn.client_id)
        if sub is None or (sub.group, sub.parent) != (group_name, parent):
            sub = LiteSubscription(group_name, parent)
        quota = self.quota(group_name)
        if req.action == pb.PARTIAL_ADD:
            after = sub.names | set(names)
        elif req.action == pb.PARTIAL_REMOVE:
            after = sub.names - set(names)
        elif req.action == pb.COMPLETE_ADD:
            if req.HasField("version") and req.version < sub.version:
                return answer(pb.OK, "an older complete subscription: kept the newer one")
            after = set() if wildcard else set(names)
        else:
            self.forget(conn.client_id)
            return answer(pb.OK, "OK")
        if 0 <= quota and len(after) > quota + LITE_SUBSCRIPTION_QUOTA_MARGIN:
            return answer(pb.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, f"{len(after)} lite topics are more than the group's "
                                                                f"quota {quota} (lite.sub.client.quota) allows")
        for name in after - sub.names:
            self._lmq(parent, name)  # subscribed before its first message: made now, read from its start
        before, sub.names = sub.names, after
        sub.synced_ms = self.clock.now_ms()
        if req.action == pb.COMPLETE_ADD:
            sub.wildcard = wildcard
            sub.version = req.version if req.HasField("version") else sub.version
        if group_attribute(group, SUB_MODEL) == "Exclusive":
            self._exclusive(group, sub, req.action, set(names), conn.client_id)
        if req.action == pb.PARTIAL_ADD and req.HasField("offset_option") and not wildcard:
            for name in names:
                self._reset_offset(group_name, lmq_name(parent, name), req.offset_option)
        if req.action == pb.PARTIAL_REMOVE and group_attribute(group, RESET_OFFSET_UNSUBSCRIBE) == "true":
            for name in set(names) & before:  # 5.5: an unsubscribed lite topic is read again from its start
                self._reset_offset(group_name, lmq_name(parent, name), FROM_START)
        self.subscriptions[conn.client_id] = sub
        self.arrived(parent)
        return answer(pb.OK, "OK")

    def _exclusive(self, group: SubscriptionGroupConfig, sub: LiteSubscription, action: int, names: set[str],
                   client_id: str) -> None:
        """An Exclusive group (``lite.sub.model``, 5.5): a lite topic one client adds is taken from
        every other client of the group, which is told (NotifyUnsubscribeLite) and not served it
        again until it adds it again itself; a complete sync that still names a taken lite topic
        is told again, and one that no longer names it clears the mark. With
        ``lite.sub.reset.offset.exclusive`` a taken lite topic is read again from its start."""
        if action == pb.PARTIAL_ADD:
            sub.evicted -= names
            reset = group_attribute(group, RESET_OFFSET_EXCLUSIVE) == "true"
            for other_id, other in self.subscriptions.items():
                if other_id == client_id or (other.group, other.parent) != (sub.group, sub.parent):
                    continue
                for name in names & other.names - other.evicted:
                    other.evicted.add(name)
                    self.notify_unsubscribe(other_id, name)
                    if reset:
                        self._reset_offset(sub.group, lmq_name(sub.parent, name), FROM_START)
        elif action == pb.COMPLETE_ADD:
            sub.evicted &= names
            for name in sub.evicted:
                self.notify_unsubscribe(client_id, name)

    def _reset_offset(self, group: str, topic: str, option: pb.OffsetOption) -> None:
        """Where the group reads lite topic ``topic`` from after a PARTIAL_ADD with an
        ``offset_option`` (5.5's ``resetOffset``): MIN its first offset (0), MAX its end, LAST as it
        was; ``offset`` that offset; ``tail_n`` n before the group's committed offset (none when it
        has none); ``timestamp`` is ignored, as 5.5 ignores it. A move drops the group's batch in
        flight of it (its handles no longer settle), as 5.5 drops its order info."""
        service = self.pop.service
        current = service.offsets.query(group, topic, 0)
        which = option.WhichOneof("offset_type")
        target: int | None = None
        if which == "policy" and option.policy == pb.OffsetOption.MIN:
            target = 0
        elif which == "policy" and option.policy == pb.OffsetOption.MAX:
            target = service.store.get_max_offset(topic, 0)
        elif which == "offset":
            target = max(0, option.offset)
        elif which == "tail_n" and current is not None:
            target = max(0, current - option.tail_n)
        if target is None or target == current:
            return
        key = (group, topic, 0)
        service.state.in_flight.pop(key, None)
        service.state.batches.pop(key, None)
        service.state.cursors[key] = target
        service.offsets.commit(group, topic, 0, target)

    def notify_unsubscribe(self, client_id: str, lite: str) -> None:
        """Tell a client on its Telemetry stream to drop a lite topic (the Java client does; the
        Python 5.1.2 client ignores the command)."""
        conn = self.clients.conns.get(client_id)
        if conn is None or conn.stream is None:
            return
        command = rpc.TelemetryCommand(notify_unsubscribe_lite_command=rpc.NotifyUnsubscribeLiteCommand(
            lite_topic=lite))
        try:
            conn.stream.put_nowait(command)
        except asyncio.QueueFull:  # a client that does not read its stream: its next sync tells it again
            pass

    def left(self, topic: str) -> None:
        """Lite topic ``topic`` was deleted (lite_expiry): it leaves every subscription."""
        names = parent_and_lite(topic)
        if names is None:
            return
        for sub in self.subscriptions.values():
            if sub.parent == names[0]:
                sub.names.discard(names[1])
                sub.evicted.discard(names[1])

    def _names(self, conn: GrpcClientConn, req: rpc.SyncLiteSubscriptionRequest) -> list[str]:
        """The lite topics a sync names, the Python 5.1.2 client's split name put back together."""
        names = list(req.lite_topic_set)
        settings = self.clients.settings.get(conn.client_id)
        python = settings is not None and settings.user_agent.language == pb.PYTHON
        if python and req.action == pb.PARTIAL_ADD and len(names) > 1 and all(len(n) == 1 for n in names):
            return ["".join(names)]
        return names

    def forget(self, client_id: str) -> None:
        self.subscriptions.pop(client_id, None)
        self._taken.pop(client_id, None)

    async def terminated(self, conn: GrpcClientConn) -> None:
        """A client said it terminates (NotifyClientTermination): its subscription goes here and, as
        a COMPLETE_REMOVE, on the parent's other brokers (a LiteSimpleConsumer tells only this one)."""
        sub = self.subscriptions.pop(conn.client_id, None)
        self._taken.pop(conn.client_id, None)
        if sub is not None and self.peers is not None:
            remove = rpc.SyncLiteSubscriptionRequest(action=pb.COMPLETE_REMOVE, topic=pb.Resource(name=sub.parent),
                                                     group=pb.Resource(name=sub.group))
            await self.peers.spread_sync(remove, [])

    def lite_topics(self, sub: LiteSubscription) -> list[str]:
        """The store topics ``sub`` receives from, in a random rotation (no lite topic first
        every time)."""
        if sub.wildcard:
            prefix = lmq_name(sub.parent, "")  # also the prefix of a parent "<parent>|x"'s: compared whole below
            names = [t for t in self.topics.topics()
                     if t.startswith(prefix) and (parent_and_lite(t) or ("",))[0] == sub.parent]
        else:
            names = [lmq_name(sub.parent, n) for n in sub.names - sub.evicted]
        if names:
            start = random.randrange(len(names))
            names = names[start:] + names[:start]
        return names

    # -- receiving --------------------------------------------------------------------------------

    async def receive(self, conn: GrpcClientConn, req: rpc.ReceiveMessageRequest, made: PopRequest) -> \
            AsyncIterator[rpc.ReceiveMessageResponse]:
        """A lite client's receive: an orderly pop of each lite topic it subscribes until the
        batch is full, long-polling up to the request's time when none has anything."""
        parent = req.message_queue.topic.name
        sub = self.subscriptions.get(conn.client_id)
        found: list[tuple[str, Popped]] = []
        refusal: Refusal | None = None
        if self.topics.get(parent) is None:
            yield rpc.ReceiveMessageResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {parent} not found"))
            return
        deadline = self.clock.monotonic() + made.poll_ms / 1000.0
        elsewhere: list[pb.Message] = []
        while True:
            event = self._arrivals.setdefault(parent, asyncio.Event())
            if sub is not None and sub.parent == parent and sub.group == made.group:
                found, refusal = await self._pop_all(conn.client_id, sub, made)
                if refusal is None and self._aggregates(conn) and self.peers is not None:
                    elsewhere = await self.peers.receive_elsewhere(req, min(made.max_nums, POP_MAX_MSG_NUMS)
                                                                   - len(found))
            left = deadline - self.clock.monotonic()
            if found or elsewhere or refusal is not None or left <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), min(left, LITE_WAKE_MAX_S))
            except asyncio.TimeoutError:
                pass
            sub = self.subscriptions.get(conn.client_id)
        if refusal is not None and not found and not elsewhere:
            yield rpc.ReceiveMessageResponse(status=refused(refusal))
        elif not found and not elsewhere:
            yield rpc.ReceiveMessageResponse(status=status(pb.MESSAGE_NOT_FOUND, "no new message"))
        else:
            yield rpc.ReceiveMessageResponse(status=status(pb.OK, "OK"))
            for topic, p in found:
                yield rpc.ReceiveMessageResponse(message=self._message(conn, req, made, topic, p))
            for message in elsewhere:
                yield rpc.ReceiveMessageResponse(message=message)
        yield rpc.ReceiveMessageResponse(delivery_timestamp=now_timestamp())

    async def _pop_all(self, client_id: str, sub: LiteSubscription, made: PopRequest) -> \
            tuple[list[tuple[str, Popped]], Refusal | None]:
        """What one round over ``sub``'s lite topics pops, or the refusal that stopped it (a lite
        topic deleted meanwhile is passed over)."""
        found: list[tuple[str, Popped]] = []
        taken = self._room(client_id, made.group)
        room = self.max_events(made.group) - len(taken)
        for topic in self.lite_topics(sub):
            want = min(made.max_nums, POP_MAX_MSG_NUMS) - len(found)
            if want <= 0:
                break
            if self._drained(made.group, topic) or (room <= 0 and topic not in taken):
                continue
            outcome = await self.pop.pop(PopRequest(made.group, topic, ANY_QUEUE, want, made.invisible_ms, 0,
                                                    orderly=True, attempt_id=made.attempt_id))
            if isinstance(outcome, Refusal):
                if outcome.code == ResponseCode.TOPIC_NOT_EXIST:
                    continue
                return found, outcome
            if outcome.messages and topic not in taken:
                taken.add(topic)
                room -= 1
            found += [(topic, p) for p in outcome.messages]
        return found, None

    def _room(self, client_id: str, group: str) -> set[str]:
        """The lite topics ``client_id`` holds a batch of now (`max_events` bounds them): those it
        popped whose batch is still un-acknowledged and invisible (one settled or come visible again
        is free for any client of the group)."""
        taken = self._taken.setdefault(client_id, set())
        now, batches = self.clock.now_ms(), self.pop.service.state.batches
        for topic in list(taken):
            batch = batches.get((group, topic, 0))
            if batch is None or not batch.blocked(now, ""):
                taken.discard(topic)
        return taken

    def _drained(self, group: str, topic: str) -> bool:
        """Whether ``group`` has popped everything of lite topic ``topic`` and holds none of it
        in flight: nothing to pop, so the pop (its checks, its read) is spared; a waiting
        wildcard receive looks at every lite topic of its parent each round."""
        progress = self.pop.service.progress(group, topic, 0)
        return progress is not None and progress[1] == 0 and \
            self.pop.service.store.get_max_offset(topic, 0) <= progress[0]

    def _message(self, conn: GrpcClientConn, req: rpc.ReceiveMessageRequest, made: PopRequest, topic: str,
                 popped: Popped) -> pb.Message:
        """A popped lite message as the clients read it: the parent as its topic, its lite topic,
        type LITE."""
        receipt = popped.handle.encode_receipt()
        if req.auto_renew:
            self.renewals.hold(conn, receipt, made.group, topic, popped.handle)
        message = to_message(decode_record(popped.record), receipt_handle=receipt,
                             delivery_attempt=popped.delivery_attempt, invisible_ms=made.invisible_ms)
        names = parent_and_lite(topic)
        if names is not None:
            message.topic.name = names[0]
            message.system_properties.lite_topic = names[1]
            message.system_properties.message_type = pb.LITE
        return message
