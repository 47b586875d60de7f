"""The producer side of the gRPC endpoint: routes, sends, transactions, recall.

A send is the gRPC adapter of `skiff.broker.operations.send` (the same gate, delay
and half-message parking, flush and replica waits as a remoting send), answered as
RocketMQ's proxy answers (`SendMessageActivity`); a topic is never auto-created
through gRPC (the proxy has no route for it). FIFO messages go to
the queue ``crc32(message_group) mod writeQueueNums``, so a group keeps its order;
others to a random queue. A transactional send remembers where its half message is
(END_TRANSACTION names it by offsets; the gRPC request only by ids); after a restart
the half is found by its id in the half topic's index. Several plain
messages in one request (no delay, transaction or group) are appended together
as the send path's batch: one store append, consecutive queue offsets. A LITE message
(``lite_topic`` set) is stored in its lite topic's own topic (`skiff.broker.grpc.lite`).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import cast

from skiff.broker.config import BrokerConfig
from skiff.broker.grpc.clients import GrpcClientConn, GrpcClients, HalfRef, remember
from skiff.broker.grpc.convert import Invalid, born_ms, to_properties
from skiff.broker.grpc.convert import message_type as convert_type
from skiff.broker.grpc.lite import LiteTopics
from skiff.broker.grpc.routes import BrokerQueues, Routes
from skiff.broker.grpc.status import from_code, refused, status
from skiff.broker.operations import (
    KeyQuery,
    MessagesOperation,
    Outgoing,
    Refusal,
    SendOperation,
    SendRequest,
    Sent,
    born_host,
)
from skiff.broker.operations.timer import CancelOperation
from skiff.broker.operations.transaction import EndTransactionOperation
from skiff.broker.processors.end_transaction import outcome_code
from skiff.broker.processors.send import STATUS_CODES
from skiff.broker.topics import TopicConfigManager
from skiff.broker.transactions import EndResult
from skiff.common.clock import Clock
from skiff.common.msgid import create_offset_msg_id, decode_offset_msg_id
from skiff.common.names import TRANS_HALF_TOPIC
from skiff.common.properties import Prop, encode_properties
from skiff.common.record import read_head, read_tail
from skiff.common.stored_message import raw_property
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.bodies.topic_attributes import TopicMessageType, message_type
from skiff.protocol.codes import ResponseCode
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.store.timer import CancelStatus
_TRANSACTION_END = {pb.COMMIT: int(MessageSysFlag.TRANSACTION_COMMIT),
                    pb.ROLLBACK: int(MessageSysFlag.TRANSACTION_ROLLBACK)}
_MIXED = (TopicMessageType.NORMAL, TopicMessageType.FIFO, TopicMessageType.DELAY, TopicMessageType.TRANSACTION)


def _accepted(kind: TopicMessageType | None) -> tuple[TopicMessageType, ...]:
    """The message types a topic of this message.type takes (none set: as MIXED)."""
    return _MIXED if kind is None or kind is TopicMessageType.MIXED else (kind,)


def accepted_types(attributes: Mapping[str, str]) -> list[pb.MessageType]:
    """The route's ``accept_message_types`` of a topic (the client checks its sends against them)."""
    return [cast(pb.MessageType, pb.MessageType.Value(t.value)) for t in _accepted(message_type(attributes))]


def resource(name: str) -> pb.Resource:
    return pb.Resource(name=name)


def _batchable(messages: Sequence[pb.Message]) -> bool:
    """Plain messages (no delay, transaction or FIFO group), more than one."""
    return len(messages) > 1 and all(
        m.system_properties.message_type == pb.NORMAL and not m.system_properties.HasField("delivery_timestamp")
        and not m.system_properties.HasField("message_group") for m in messages)


class Producing:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, clients: GrpcClients, clock: Clock,
                 endpoint: Callable[[str, int], pb.Endpoints], routes: Routes, sender: SendOperation,
                 ender: EndTransactionOperation, canceller: CancelOperation, messages: MessagesOperation) -> None:
        self.routes = routes
        self.sender = sender
        self.ender = ender
        self.canceller = canceller
        self.messages = messages
        self.config = config
        self.topics = topics
        self.clients = clients
        self.clock = clock
        self.endpoint = endpoint
        self.lite: LiteTopics | None = None
        """Lite topics (the server sets it): where a LITE message is stored."""

    def broker_of(self, b: BrokerQueues) -> pb.Broker:
        return pb.Broker(name=b.broker_name, id=0, endpoints=self.endpoint(b.host, b.grpc_port))

    async def query_route(self, req: rpc.QueryRouteRequest) -> rpc.QueryRouteResponse:
        brokers = await self.routes.brokers(req.topic.name)
        if not brokers:
            return rpc.QueryRouteResponse(status=status(pb.TOPIC_NOT_FOUND, f"topic {req.topic.name} not found"))
        local = self.topics.get(req.topic.name)  # a topic's attributes are known where it lives (here, or as here)
        types = accepted_types(local.attributes if local is not None else {})
        queues = []
        for b in brokers:
            broker = self.broker_of(b)
            for i in range(max(b.read_queue_nums, b.write_queue_nums)):
                readable = i < b.read_queue_nums and b.perm & Perm.READ
                writable = i < b.write_queue_nums and b.perm & Perm.WRITE
                perm = pb.READ_WRITE if readable and writable else pb.READ if readable else pb.WRITE if writable \
                    else pb.NONE
                queues.append(pb.MessageQueue(topic=req.topic, id=i, permission=perm, broker=broker,
                                              accept_message_types=types))
        return rpc.QueryRouteResponse(status=status(pb.OK, "OK"), message_queues=queues)

    async def send(self, conn: GrpcClientConn, req: rpc.SendMessageRequest) -> rpc.SendMessageResponse:
        if not req.messages:
            return rpc.SendMessageResponse(status=status(pb.MESSAGE_CORRUPTED, "no message to send"))
        if len({m.topic.name for m in req.messages}) > 1:
            return rpc.SendMessageResponse(status=status(pb.MESSAGE_CORRUPTED, "the messages name different topics"))
        entries = await self._send_batch(conn, req.messages) if _batchable(req.messages) else None
        if entries is None:
            entries = [await self._send_one(conn, m) for m in req.messages]
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else status(pb.MULTIPLE_RESULTS)
        return rpc.SendMessageResponse(status=top, entries=entries)

    async def _send_one(self, conn: GrpcClientConn, msg: pb.Message) -> rpc.SendResultEntry:
        if self.lite is not None and self.lite.peers is not None and msg.system_properties.lite_topic:
            owners = await self.lite.peers.forward_send(msg)  # another broker owns its lite topic
            if owners is not None:
                return owners
        now = self.clock.now_ms()
        try:
            if not msg.body:
                raise Invalid(pb.MESSAGE_BODY_EMPTY, "the message body is empty")
            if len(msg.body) > self.clients.max_body_bytes:
                raise Invalid(pb.MESSAGE_BODY_TOO_LARGE, f"the body is {len(msg.body)} bytes, more than "
                                                         f"{self.clients.max_body_bytes} (maxMessageSize)")
            props = to_properties(msg, now)
            lite = self._lite_topic(msg)
            if lite is None:
                self._check_type(msg.topic.name, props)
        except Invalid as exc:
            return rpc.SendResultEntry(status=status(exc.code, str(exc)))
        topic = msg.topic.name if lite is None else lite
        transactional = msg.system_properties.message_type == pb.TRANSACTION
        request = SendRequest(topic=topic, queue_id=self._queue(topic, msg), body=msg.body,
                              properties=encode_properties(props).decode(),
                              sys_flag=int(MessageSysFlag.TRANSACTION_PREPARED) if transactional else 0,
                              born_ms=born_ms(msg, now), born_host=born_host(conn.peer), template=None)
        sent = await _settled(self.sender.send(request, _same))
        if isinstance(sent, Refusal):
            return rpc.SendResultEntry(status=refused(sent))
        code = STATUS_CODES[sent.result.status]
        if code != ResponseCode.SUCCESS:
            return rpc.SendResultEntry(status=from_code(code, sent.result.reason or sent.result.status.name))
        if lite is not None and self.lite is not None:
            self.lite.arrived(msg.topic.name)
        msg_id = msg.system_properties.message_id
        offset = sent.queue_offset
        offset_msg_id = sent.msg_ids[0]
        if transactional:
            remember(self.clients.halves, msg_id, HalfRef(topic, offset,
                                                          decode_offset_msg_id(offset_msg_id).physical_offset,
                                                          offset_msg_id))
        recall = ""
        if msg.system_properties.HasField("delivery_timestamp"):
            text = f"v1 {topic} {self.config.broker_name} {props.get('TIMER_DELIVER_MS')} {msg_id}"
            recall = base64.urlsafe_b64encode(text.encode()).decode()
        return rpc.SendResultEntry(status=status(pb.OK, "OK"), message_id=msg_id, transaction_id=msg_id,
                                   offset=offset, recall_handle=recall)

    async def _send_batch(self, conn: GrpcClientConn, messages: Sequence[pb.Message]) -> list[rpc.SendResultEntry] | None:
        """Several plain messages in one append (the send path's batch), or None when one of
        them needs its own answer (then each is sent alone)."""
        now, topic = self.clock.now_ms(), messages[0].topic.name
        try:
            props = [to_properties(m, now) for m in messages]
            self._check_type(topic, props[0])
        except Invalid:
            return None
        if any(not m.body or len(m.body) > self.clients.max_body_bytes for m in messages):
            return None
        outgoing = [Outgoing(m.body, p, born_ms(m, now)) for m, p in zip(messages, props)]
        answered = self.sender.send_messages(topic, outgoing, born_host(conn.peer), _same)
        if answered is None:
            return None
        sent = await _settled(answered)
        if isinstance(sent, Refusal):
            return [rpc.SendResultEntry(status=refused(sent)) for _ in messages]
        code = STATUS_CODES[sent.result.status]
        if code != ResponseCode.SUCCESS:
            failed = from_code(code, sent.result.reason or sent.result.status.name)
            return [rpc.SendResultEntry(status=failed) for _ in messages]
        first = sent.queue_offset
        ok = status(pb.OK, "OK")
        return [rpc.SendResultEntry(status=ok, message_id=m.system_properties.message_id,
                                    transaction_id=m.system_properties.message_id, offset=first + i)
                for i, m in enumerate(messages)]

    def _lite_topic(self, msg: pb.Message) -> str | None:
        """The topic a LITE message is stored in; None for any other message."""
        sp = msg.system_properties
        if self.lite is None or not (sp.HasField("lite_topic") or sp.message_type == pb.LITE):
            return None
        return self.lite.store_topic(msg)

    def _queue(self, topic: str, msg: pb.Message) -> int:
        """The queue for a FIFO message (its group's, always the same), else -1 (any; a
        priority message's is the send operation's choice)."""
        tc = self.topics.get(topic)
        group = msg.system_properties.message_group
        if tc is None or not group or tc.write_queue_nums <= 0:
            return -1
        return zlib.crc32(group.encode()) % tc.write_queue_nums

    def _check_type(self, topic: str, props: dict[str, str]) -> None:
        """Refuse a message of another type than its topic's message.type, as the proxy's
        ``enableTopicMessageTypeCheck``; a topic without the attribute takes every type but
        PRIORITY (Skiff's topics before the attribute)."""
        tc = self.topics.get(topic)
        if tc is None or not self.config.enable_topic_message_type_check:
            return
        actual = TopicMessageType(pb.MessageType.Name(convert_type(props)))
        accepted = _accepted(message_type(tc.attributes))
        if actual not in accepted:
            raise Invalid(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                          f"the topic {topic} takes {'/'.join(accepted)} messages (message.type), not {actual}")

    async def end_transaction(self, conn: GrpcClientConn, req: rpc.EndTransactionRequest) -> rpc.EndTransactionResponse:
        if not req.transaction_id:
            return rpc.EndTransactionResponse(status=status(pb.INVALID_TRANSACTION_ID, "no transaction_id"))
        half = self.clients.halves.get(req.transaction_id) or self._stored_half(req.transaction_id)
        if half is None:
            return rpc.EndTransactionResponse(status=status(
                pb.INVALID_TRANSACTION_ID, f"transaction {req.transaction_id} is not known to this endpoint"))
        request = EndTransactionRequestHeader(half.producer_group, half.queue_offset, half.commit_log_offset,
                                              _TRANSACTION_END.get(req.resolution, 0), half.offset_msg_id,
                                              req.source == pb.SOURCE_SERVER_CHECK, req.transaction_id)
        ended = self.ender.end(request)
        code, remark = outcome_code(ended if isinstance(ended, EndResult) else await ended)
        if code == ResponseCode.SUCCESS and req.resolution in _TRANSACTION_END:
            self.clients.halves.pop(req.transaction_id, None)
        return rpc.EndTransactionResponse(status=from_code(code, remark))

    def _stored_half(self, tx_id: str) -> HalfRef | None:
        """A half message found by its id (= UNIQ_KEY) in the half topic's index, for a
        transaction this endpoint did not see sent (the broker restarted since)."""
        found = self.messages.by_key(KeyQuery(TRANS_HALF_TOPIC, tx_id, 1, 0, self.clock.now_ms())).records
        if not found:
            return None
        head = read_head(found[0])
        group = raw_property(read_tail(found[0], 0, head).properties_raw, Prop.PGROUP) or ""
        return HalfRef(group, head.queue_offset, head.physical_offset,
                       create_offset_msg_id(head.store_host, head.physical_offset))

    async def recall(self, conn: GrpcClientConn, req: rpc.RecallMessageRequest) -> rpc.RecallMessageResponse:
        try:
            version, topic, _, _, msg_id = base64.urlsafe_b64decode(req.recall_handle.encode()).decode().split(" ")
        except ValueError:
            return rpc.RecallMessageResponse(status=status(pb.BAD_REQUEST, "the recall handle does not decode"))
        if version != "v1" or topic != req.topic.name:
            return rpc.RecallMessageResponse(status=status(pb.BAD_REQUEST, "the recall handle is not for this topic"))
        result = await self.canceller.cancel(msg_id)
        if isinstance(result, Refusal):
            return rpc.RecallMessageResponse(status=refused(result), message_id=msg_id)
        done = result.status in (CancelStatus.CANCELLED, CancelStatus.ALREADY_CANCELLED)
        return rpc.RecallMessageResponse(status=status(pb.OK if done else pb.NOT_FOUND, result.status.name),
                                         message_id=msg_id)


def _same(sent: Sent) -> Sent:
    """The gRPC door encodes a send after it is settled: the operation hands back what it stored."""
    return sent


async def _settled(outcome: Sent | Refusal | Awaitable[Sent]) -> Sent | Refusal:
    """A send's outcome, awaited when it comes later (a flush, a slave's acknowledgement)."""
    if isinstance(outcome, (Sent, Refusal)):
        return outcome
    return await outcome
