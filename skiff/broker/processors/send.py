"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Every code is one path: the header says which topic and queue, the ``batch`` /
``m`` field says whether the body is one message or a batch (the C++ client
sends batches on code 10 with ``batch`` = "1", zlib-compressed as a whole when
sysFlag bit 0 is set: it is inflated, then split). Checks, in RocketMQ's order:
the broker's and the topic's write permission, the topic name, auto-creation
from the template topic the producer names (TBW102), the queue id (negative:
any write queue; at or past the larger queue count: SYSTEM_ERROR, as msgCheck). Then the
message goes through the `MessageWriter` (delay and half messages are parked)
into the store in one append, and the store's status becomes the response code.

The handler is synchronous, so the transport answers in the loop step that read
the request, except under SYNC_FLUSH, where the answer waits for the fsync that
covers the message (group commit), and under SYNC_MASTER, where it waits for a
slave's acknowledgement (a `LateAnswer` the acknowledgement's callback gives).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

from skiff.broker.compaction import is_compacted, keys_refusal
from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.redirect import REDIRECT_PROPERTIES
from skiff.broker.stats import BrokerStats
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.broker.writer import MessageWriter, batch_refusal
from skiff.common.errors import DecodeError
from skiff.common.names import SYSTEM_TOPICS, is_retry_topic, topic_error
from skiff.common.properties import Prop, decode_properties
from skiff.common.record import pack_host
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.bodies.topic import Perm, TopicConfig
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.send import SendMessageRequestHeader, decode_send_request
from skiff.protocol.message_codec import split_batch_columns
from skiff.store import MessageInput, MessageStore, PutResult, PutStatus
from skiff.transport.connection import Connection, Handler
from skiff.transport.late import LateAnswer

_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_CLIENT_FLAGS = ~int(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
"""A sender's sysFlag less the host-length bits: the store sets those from the real addresses,
and a bit that disagreed with the bytes written would make the record unreadable."""
_WRITE = int(Perm.WRITE)

STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.DISK_FULL: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
    PutStatus.OS_PAGE_CACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
"""Store outcome → response code. FLUSH_DISK_TIMEOUT still carries the send result
(clients treat codes 10-12 as a SendResult with that status)."""

_WITH_RESULT = frozenset({ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                          ResponseCode.SLAVE_NOT_AVAILABLE})
_REPLICA_REASONS = {
    PutStatus.FLUSH_SLAVE_TIMEOUT: "stored on the master; no slave acknowledged it within slaveTimeout",
    PutStatus.SLAVE_NOT_AVAILABLE: "stored on the master; no slave is connected, or it is haSlaveFallbehindMax behind",
}


class SyncReplicas(Protocol):
    def replicate(self, end: int, done: Callable[[bool], None]) -> PutStatus | None: ...


@functools.lru_cache(maxsize=4096)
def born_host(peer: tuple[str, int]) -> bytes:
    """A client's address packed as a record's BORNHOST (cached: one per connection)."""
    return pack_host(peer[0], peer[1])


class SendProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 writer: MessageWriter, stats: BrokerStats | None = None, sync_replicas: SyncReplicas | None = None,
                 role: Role | None = None) -> None:
        """``sync_replicas``: the master's HA service, which SYNC_MASTER sends wait on;
        ``role``: what the broker is now (default: what broker.conf says)."""
        self.config = config
        self.stats = stats
        self.role = role or Role.of(config)
        self.sync_replicas = sync_replicas
        self.store = store
        self.topics = topics
        self.writer = writer
        self._extra = {"MSG_REGION": config.region_id, "TRACE_ON": "true" if config.trace_on else "false"}
        self._valid_topics: set[str] = set()

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.SEND_MESSAGE: self.send,
            RequestCode.SEND_MESSAGE_V2: self.send,
            RequestCode.SEND_BATCH_MESSAGE: self.send,
        }

    def send(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | LateAnswer | Awaitable[RemotingCommand]:
        h = decode_send_request(req.code, req.ext_fields)
        target = self.target(req, h)
        if isinstance(target, RemotingCommand):
            return target
        queue_id = target
        host = born_host(conn.peer)
        if h.batch:
            inputs, props = self._batch(h, queue_id, bytes(req.body), host)
        else:
            props = decode_properties(h.properties) if h.properties else {}
            inputs = self.writer.message(
                h.topic, queue_id, bytes(req.body), props, h.properties.encode() if h.properties else b"", h.flag,
                h.sys_flag & _CLIENT_FLAGS, h.born_timestamp, host, h.reconsume_times or 0)
        if isinstance(inputs, str):
            return req.response(ResponseCode.MESSAGE_ILLEGAL, inputs)
        batch = [inputs] if isinstance(inputs, MessageInput) else inputs
        why = keys_refusal(h.topic, batch) if is_compacted(self.topics.get(h.topic)) else None
        if why is not None:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, why)
        return self.store_and_answer(req, batch, queue_id, props.get(Prop.WAIT) != "false")

    def store_and_answer(self, req: RemotingCommand, inputs: list[MessageInput], queue_id: int,
                         wait: bool) -> RemotingCommand | LateAnswer | Awaitable[RemotingCommand]:
        """Append ``inputs`` in one write; under SYNC_FLUSH a ``wait``ing sender is answered
        after the fsync that covers them."""
        result = self.store.put_messages(inputs)
        if self.stats is not None and result.status is PutStatus.PUT_OK:
            self.stats.stored(inputs[0].topic, result.message_count, len(req.body))
        if not wait or not result.ok:
            return put_response(req, result, queue_id, self._extra)
        if self.sync_replicas is None or not self.role.is_sync_master:
            if result.flushed is None:
                return put_response(req, result, queue_id, self._extra)
            return self._after_flush(req, queue_id, result, None)
        if result.flushed is None:
            return self._answer_replicated(req, queue_id, result, self.sync_replicas)
        replicated: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        at_once = self.sync_replicas.replicate(result.physical_offset + result.wrote_bytes,
                                               lambda ok: replicated.done() or replicated.set_result(ok))
        return self._after_flush(req, queue_id, result, replicated if at_once is None else at_once)

    def _answer_replicated(self, req: RemotingCommand, queue_id: int, result: PutResult,
                           replicas: SyncReplicas) -> RemotingCommand | LateAnswer:
        """ASYNC_FLUSH under SYNC_MASTER: the answer, or a late one the acknowledgement gives
        (no future or task per send; the transport writes it from the acknowledgement's callback)."""
        answer = ReplicatedAnswer(req, queue_id, result, self._extra)
        at_once = replicas.replicate(result.physical_offset + result.wrote_bytes, answer)
        return answer if at_once is None else replica_response(req, queue_id, result, at_once, self._extra)

    def target(self, req: RemotingCommand, h: SendMessageRequestHeader) -> int | RemotingCommand:
        """The queue to write to, or the refusal."""
        topic = h.topic
        refusal = self.role.refusal()
        if refusal is not None:
            return req.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                f"the broker {self.config.broker_name} (brokerId {self.role.broker_id}) {refusal}")
        if not self.config.broker_permission & _WRITE:
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker {self.config.broker_name} does not accept messages now (brokerPermission)")
        topic_refusal = self._topic_refusal(topic)
        if topic_refusal is not None:
            return req.response(*topic_refusal)
        tc = self.topics.get(topic) or self._create(h)
        if tc is None:
            return req.response(ResponseCode.TOPIC_NOT_EXIST, self._no_topic_remark(topic, h.default_topic))
        if not tc.perm & _WRITE:
            return req.response(ResponseCode.NO_PERMISSION, f"the topic {topic} does not accept messages (perm {tc.perm})")
        queue_id = h.queue_id
        if queue_id < 0:  # "any queue"
            return random.randrange(tc.write_queue_nums) if tc.write_queue_nums else req.response(
                ResponseCode.NO_PERMISSION, f"the topic {topic} has no write queue")
        if queue_id >= max(tc.write_queue_nums, tc.read_queue_nums):  # msgCheck's bound: a queue still read is kept
            return req.response(ResponseCode.SYSTEM_ERROR,
                                f"queueId {queue_id} is illegal: topic {topic} has {tc.write_queue_nums} write and "
                                f"{tc.read_queue_nums} read queues")
        return queue_id

    def _topic_refusal(self, topic: str) -> tuple[int, str] | None:
        if topic in self._valid_topics:
            return None
        why = topic_error(topic)
        if why is not None:
            return ResponseCode.MESSAGE_ILLEGAL, why
        if topic in SYSTEM_TOPICS:
            return ResponseCode.NO_PERMISSION, f"sending to the system topic {topic} is forbidden"
        if len(self._valid_topics) < 65536:
            self._valid_topics.add(topic)
        return None

    def _create(self, h: SendMessageRequestHeader) -> TopicConfig | None:
        if is_retry_topic(h.topic):
            return self.topics.find_or_create(h.topic, 1, READ_WRITE)
        return self.topics.create_from_template(h.topic, h.default_topic, h.default_topic_queue_nums, 0)

    def _no_topic_remark(self, topic: str, template: str) -> str:
        why = ("autoCreateTopicEnable is false" if not self.config.auto_create_topic_enable
               else f"its template topic {template!r} does not exist here or does not let topics inherit it")
        return f"topic {topic} does not exist on broker {self.config.broker_name} and cannot be created: {why}"

    def _batch(self, h: SendMessageRequestHeader, queue_id: int, body: bytes,
               host: bytes) -> tuple[list[MessageInput] | str, dict[str, str]]:
        outer = decode_properties(h.properties) if h.properties else {}
        if is_retry_topic(h.topic):
            return f"a batch cannot be sent to the retry topic {h.topic}", outer
        try:
            records = split_batch_columns(body, compressed=bool(h.sys_flag & _COMPRESSED))
        except DecodeError as exc:
            return f"the batch body does not decode: {exc}", outer
        if not REDIRECT_PROPERTIES.isdisjoint(outer):
            return batch_refusal(outer), outer
        flags = h.sys_flag & _CLIENT_FLAGS & ~_COMPRESSED
        return self.writer.batch(h.topic, queue_id, records, flags, h.born_timestamp, host,
                                 h.reconsume_times or 0), outer

    async def _after_flush(self, req: RemotingCommand, queue_id: int, result: PutResult,
                           replicated: PutStatus | asyncio.Future[bool] | None) -> RemotingCommand:
        """The answer once the fsync (SYNC_FLUSH) and a slave (SYNC_MASTER) have the message;
        a replica failure wins over a flush failure, as in RocketMQ. The message is stored
        here either way, so the answer carries the send result."""
        flushed = PutStatus.PUT_OK if result.flushed is None else await asyncio.wrap_future(result.flushed)
        if isinstance(replicated, asyncio.Future):
            replicated = PutStatus.PUT_OK if await replicated else PutStatus.FLUSH_SLAVE_TIMEOUT
        if replicated is not None and replicated is not PutStatus.PUT_OK:
            return replica_response(req, queue_id, result, replicated, self._extra)
        if flushed is not PutStatus.PUT_OK:
            result = dataclasses.replace(result, status=flushed, reason="the fsync did not finish within syncFlushTimeout")
        return put_response(req, result, queue_id, self._extra)


class ReplicatedAnswer(LateAnswer):
    """A SYNC_MASTER send's answer and its replica waiter in one object: called with True
    once a slave has the message, False after ``slaveTimeout``."""

    __slots__ = ("req", "queue_id", "result", "extra")

    def __init__(self, req: RemotingCommand, queue_id: int, result: PutResult, extra: dict[str, str]) -> None:
        super().__init__()
        self.req, self.queue_id, self.result, self.extra = req, queue_id, result, extra

    def __call__(self, ok: bool) -> None:
        if ok:
            self.give(put_response(self.req, self.result, self.queue_id, self.extra))
        else:
            self.give(replica_response(self.req, self.queue_id, self.result, PutStatus.FLUSH_SLAVE_TIMEOUT, self.extra))


def replica_response(req: RemotingCommand, queue_id: int, result: PutResult, replicated: PutStatus,
                     extra: dict[str, str]) -> RemotingCommand:
    if replicated is not PutStatus.PUT_OK:
        result = dataclasses.replace(result, status=replicated, reason=_REPLICA_REASONS[replicated])
    return put_response(req, result, queue_id, extra)


def put_response(req: RemotingCommand, result: PutResult, queue_id: int,
                 extra: dict[str, str] | None = None) -> RemotingCommand:
    """The response to a send (or send-back) from the store's result."""
    code = STATUS_CODES[result.status]
    if code not in _WITH_RESULT:
        return req.response(code, result.reason or result.status.name)
    ext = {
        "msgId": ",".join(result.offset_msg_ids),
        "queueId": str(queue_id),
        "queueOffset": str(result.queue_offset),
    }
    if extra:
        ext.update(extra)
    return req.response(code, result.reason or None, ext)
