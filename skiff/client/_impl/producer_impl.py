"""The producer's send kernel (RocketMQ's DefaultMQProducerImpl).

A message is checked, given its UNIQ_KEY and properties string once, its body
compressed when large, and then sent: to a queue the fault strategy picks
(with retries on another broker), or to the queue a selector or the caller
pins (one attempt: a retry elsewhere would reorder). Retries happen on a
failure that another broker may not have (unreachable, busy, topic missing
there, no permission there); any other error code is raised at once. One
``send_timeout_ms`` covers every attempt of a send, as in RocketMQ.

A failover costs a send latency, not an error: while no group of the topic has
a master (the NameServer lists only slaves: the master died and the election or
its registration is under way), the send waits for one, fetching the route
again with a backoff, until the send timeout runs out (then `NoMasterError`
says so); that wait is not an attempt. After an attempt fails in a way that says
the master may be gone (no answer, or SERVICE_NOT_AVAILABLE: a slave, or a master
without its lease) and the retry would go back to that same master, the retry
first waits (100 ms, then twice as long each time up to 1 s) for the route to
change, which it does at once when the NameServer has dropped the dead master.

A batch is split into sends of at most ``max_message_size`` encoded bytes and
`BATCH_MAX_MESSAGES` messages; each becomes one SEND_BATCH_MESSAGE whose body
is the §3.4 batch encoding (every message with its own UNIQ_KEY).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from skiff.client._impl.api import SEND_RESULT_CODES, UNREACHABLE, SendResponse
from skiff.client._impl.fault import FaultStrategy
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.route import DEFAULT_TOPIC_QUEUE_NUMS, TopicPublishInfo
from skiff.client._impl.selectors import QueueSelector
from skiff.client.errors import (
    ClientConfigError,
    ClientTimeoutError,
    MessageValidationError,
    NoBrokerError,
    NoMasterError,
    SendFailedError,
)
from skiff.client.results import SendResult, SendStatus, make_send_result
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.limits import BATCH_MAX_MESSAGES, COMPRESS_BODY_OVER_BYTES, MESSAGE_MAX_BYTES
from skiff.common.message import Message, MessageQueue
from skiff.common.msgid import UNIQ_IDS, UniqIdGenerator
from skiff.common.names import SYSTEM_TOPICS, TBW102, group_error, is_retry_topic, topic_error
from skiff.common.properties import Prop
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import ConnectionClosed, MessageIllegalError, RequestTimeout, ResponseError, error_for
from skiff.protocol.headers.send import SendMessageRequestHeaderV2, SendMessageResponseHeader
from skiff.protocol.message_codec import compress_body, encode_bare_batch, encode_batch, send_properties

log = logging.getLogger(__name__)

STATUS_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
RETRY_ON_ANOTHER_BROKER = frozenset({
    ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT, ResponseCode.FLOW_CONTROL,
})
"""Broker answers after which a send moves to another broker (RocketMQ's list, plus busy and flow control)."""
STALE_ROUTE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION,
                               ResponseCode.SERVICE_NOT_AVAILABLE})
"""Answers after which the topic's route is fetched again (SERVICE_NOT_AVAILABLE: the broker may be a slave now)."""
RETRY_BACKOFF_FIRST_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0
"""How long a retry to the master that just failed waits for the route to change: 100 ms, then
twice as long each time, at most 1 s (and never past the send timeout)."""
_SEND_OK = SendStatus.SEND_OK
"""Named once: an enum member named through its class costs a metaclass hook per use."""
_COMPRESSED = int(MessageSysFlag.COMPRESSED)
_PREPARED = int(MessageSysFlag.TRANSACTION_PREPARED)
_DELAY_PROP_SET = frozenset({Prop.DELAY, Prop.DELIVER_TIME_MS, Prop.DELAY_MS, Prop.TIMER_DELIVER_MS,
                             Prop.TIMER_DELAY_SEC, Prop.TIMER_DELAY_MS})
_SEND_V2 = int(RequestCode.SEND_MESSAGE_V2)
_SEND_BATCH = int(RequestCode.SEND_BATCH_MESSAGE)
_WIRE = SendMessageRequestHeaderV2.WIRE_NAMES
"""The send header's extFields keys, which `ProducerCore._send_ext` writes without the header class."""
_SYS_FLAG, _BORN, _FLAG, _PROPERTIES = (_WIRE[n] for n in ("sys_flag", "born_timestamp", "flag", "properties"))
_RECONSUME_TIMES, _UNIT_MODE, _BATCH, _MAX_RECONSUME_TIMES = (
    _WIRE[n] for n in ("reconsume_times", "unit_mode", "batch", "max_reconsume_times"))
_MESSAGE_TYPE = {Message}
_TOPIC_OF, _BODY_OF, _PROPERTIES_OF = (operator.attrgetter(n) for n in ("topic", "body", "properties"))
"""A batch's screen reads these in C-level passes (`map`)."""
_TOPICS_REMEMBERED = 4096
"""Checked topic names a producer keeps (a producer that sends to more checks some again)."""
_EXT_HEADS_REMEMBERED = 16384
"""(topic, queue id) pairs whose fixed part of the send header a producer keeps."""


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    """A producer's settings, with RocketMQ's names and defaults."""

    group: str
    send_timeout_ms: int = 3000
    retry_times_when_send_failed: int = 2
    """Extra attempts of a send, each on another broker when there is one (3 attempts in all)."""
    retry_another_broker_when_not_store_ok: bool = False
    """Also retry when the broker stored the message with a caveat (flush or slave timeout)."""
    compress_body_over_bytes: int = COMPRESS_BODY_OVER_BYTES
    max_message_size: int = MESSAGE_MAX_BYTES
    latency_fault_enabled: bool = True
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS

    def __post_init__(self) -> None:
        problem = group_error(self.group)
        if problem:
            raise ClientConfigError(f"producer group: {problem}")
        if self.send_timeout_ms <= 0:
            raise ClientConfigError(f"send_timeout_ms must be more than 0, not {self.send_timeout_ms}")
        if self.retry_times_when_send_failed < 0:
            raise ClientConfigError("retry_times_when_send_failed must be 0 or more")
        if not 0 < self.max_message_size <= MESSAGE_MAX_BYTES * 4:
            raise ClientConfigError(f"max_message_size must be between 1 and {MESSAGE_MAX_BYTES * 4} bytes")


class Prepared(NamedTuple):
    """A message (or a batch chunk) encoded once, ready for any number of attempts."""

    topic: str
    body: bytes
    sys_flag: int
    properties: str
    flag: int
    msg_id: str
    """UNIQ_KEY, or the chunk's ids comma-joined."""
    batch: bool = False
    reconsume_times: int | None = None
    max_reconsume_times: int | None = None


def check_topic(topic: str) -> None:
    problem = topic_error(topic)
    if problem:
        raise MessageValidationError(problem)
    if topic in SYSTEM_TOPICS:
        raise MessageValidationError(f"the topic {topic!r} is a system topic; send to your own topic")


class ProducerCore:
    """Validation, encoding, queue choice, retries and results, for one producer group."""

    def __init__(self, options: ProducerOptions, instance: ClientInstance, *, clock: Clock = SYSTEM_CLOCK,
                 fault: FaultStrategy | None = None, uniq_ids: UniqIdGenerator = UNIQ_IDS) -> None:
        self.options = options
        self.instance = instance
        self.clock = clock
        self.fault = fault or FaultStrategy(options.latency_fault_enabled, clock)
        self._uniq_ids = uniq_ids
        self._uniq_id = uniq_ids.next_id
        self._topics: set[str] = set()
        """Topic names that passed `check_topic`."""
        self._ext_heads: dict[tuple[str, int], dict[str, str]] = {}
        """Per topic and queue id, the send header's extFields that every send to them repeats."""

    # ------------------------------------------------------------ preparing

    def check_message(self, msg: Message) -> None:
        """Refuse what no broker would store, with the reason (RocketMQ's Validators.checkMessage)."""
        if not isinstance(msg, Message):
            raise MessageValidationError(f"expected a Message, got {type(msg).__name__}")
        self._check_topic(msg.topic)
        if not msg.body and not msg.keys:
            raise MessageValidationError("the message body is empty (only a tombstone, a message with KEYS "
                                         "for a compacted topic, may be empty)")
        if len(msg.body) > self.options.max_message_size:
            raise MessageValidationError(
                f"the message body is {len(msg.body)} bytes, more than max_message_size "
                f"{self.options.max_message_size}")

    def _check_topic(self, topic: str) -> None:
        """`check_topic`, remembered per name."""
        if type(topic) is not str or topic not in self._topics:
            check_topic(topic)
            if len(self._topics) >= _TOPICS_REMEMBERED:
                self._topics.clear()
            self._topics.add(topic)

    def prepare(self, msg: Message) -> Prepared:
        self.check_message(msg)
        own = msg.properties
        uniq = own.get(Prop.UNIQ_KEY) or self._uniq_id()
        props = _properties(msg, uniq)
        body, sys_flag = compress_body(msg.body, 0, over_bytes=self.options.compress_body_over_bytes)
        if own and own.get(Prop.TRAN_MSG) == "true":
            sys_flag |= _PREPARED
        retry = is_retry_topic(msg.topic)
        return Prepared(
            msg.topic, body, sys_flag, props, msg.flag, uniq, False,
            _int_prop(msg, Prop.RECONSUME_TIME) if retry else None,
            _int_prop(msg, Prop.MAX_RECONSUME_TIMES) if retry else None,
        )

    def prepare_batch(self, msgs: Sequence[Message]) -> list[Prepared]:
        """Check and encode a batch, split to the size and count limits.

        The usual batch fits in one send and is encoded in one pass; one that
        does not is encoded message by message into as many sends as it needs.
        """
        bare = self._check_batch(msgs)
        topic, wait = msgs[0].topic, msgs[0].properties.get(Prop.WAIT, "true")
        if len(msgs) <= BATCH_MAX_MESSAGES:
            body, ids = self._encode_bare(msgs) if bare else self._encode(msgs)
            if len(body) <= self.options.max_message_size:
                return [self._chunk(topic, body, ids, wait)]
        chunks: list[Prepared] = []
        records: list[bytes] = []
        chunk_ids: list[str] = []
        size = 0
        for msg in msgs:
            record, uniq = self._encode((msg,))
            if records and (size + len(record) > self.options.max_message_size or len(records) >= BATCH_MAX_MESSAGES):
                chunks.append(self._chunk(topic, b"".join(records), ",".join(chunk_ids), wait))
                records, chunk_ids, size = [], [], 0
            records.append(record)
            chunk_ids.append(uniq)
            size += len(record)
        chunks.append(self._chunk(topic, b"".join(records), ",".join(chunk_ids), wait))
        return chunks

    def prepare_encoded_batch(self, topic: str, body: bytes, msg_ids: Sequence[str]) -> Prepared:
        """A batch body encoded by the caller, checked as a whole (topic, size, ids)."""
        check_topic(topic)
        if is_retry_topic(topic):
            raise MessageValidationError("a batch cannot be sent to a retry topic")
        if not body or not msg_ids:
            raise MessageValidationError("the batch is empty")
        if len(msg_ids) > BATCH_MAX_MESSAGES or len(body) > self.options.max_message_size:
            raise MessageValidationError(
                f"the batch of {len(msg_ids)} messages and {len(body)} bytes is over the limits "
                f"({BATCH_MAX_MESSAGES} messages, max_message_size {self.options.max_message_size} bytes)")
        return self._chunk(topic, body, ",".join(msg_ids), "true")

    def _encode_bare(self, msgs: Sequence[Message]) -> tuple[bytes, str]:
        """`_encode` of messages without properties of their own: their ids taken at once, body,
        properties and ids made in one pass (`encode_bare_batch`); the ids come joined by commas."""
        return encode_bare_batch(msgs, *self._uniq_ids.take(len(msgs)))  # lengths checked: they fit

    def _encode(self, msgs: Sequence[Message]) -> tuple[bytes, str]:
        """The batch body of ``msgs`` and their UNIQ_KEYs (each one's own, or a new one), joined by commas."""
        generated: list[str] = []
        new_id = self._uniq_id

        def uniq() -> str:
            value = new_id()
            generated.append(value)
            return value

        try:
            body = encode_batch(msgs, uniq)
        except MessageIllegalError as exc:
            raise MessageValidationError(exc.remark) from None
        return body, ",".join([m.properties.get(Prop.UNIQ_KEY) or g for m, g in zip(msgs, generated)])

    def _check_batch(self, msgs: Sequence[Message]) -> bool:
        """Refuse a batch no broker would store, with the reason; whether none of its messages has
        properties of its own (the usual batch, which `_encode_bare` encodes).

        The usual batch is screened in C-level passes over the messages (types, topics, body
        lengths, properties); only one that fails the screen, or has properties, is looked at
        message by message, to say what is wrong."""
        if not msgs:
            raise MessageValidationError("the batch is empty")
        topic = msgs[0].topic
        check_topic(topic)
        if is_retry_topic(topic):
            raise MessageValidationError("a batch cannot be sent to a retry topic")
        limit = self.options.max_message_size
        if set(map(type, msgs)) == _MESSAGE_TYPE and set(map(_TOPIC_OF, msgs)) == {topic}:
            lengths = list(map(len, map(_BODY_OF, msgs)))
            if min(lengths) and max(lengths) <= limit and not any(map(_PROPERTIES_OF, msgs)):
                return True
        self._check_each(msgs, topic, limit)
        return False

    def _check_each(self, msgs: Sequence[Message], topic: str, limit: int) -> None:
        wait = msgs[0].properties.get(Prop.WAIT, "true")
        for msg in msgs:
            if type(msg) is not Message or msg.topic != topic or not msg.body or len(msg.body) > limit:
                self.check_message(msg)
                raise MessageValidationError(f"a batch goes to one topic: {topic!r} and {msg.topic!r} are mixed")
            props = msg.properties
            if props and not _DELAY_PROP_SET.isdisjoint(props):
                raise MessageValidationError("delayed messages cannot be sent in a batch")
            if props.get(Prop.WAIT, "true") != wait:
                raise MessageValidationError("the messages of a batch must agree on WAIT")

    def _chunk(self, topic: str, body: bytes, ids: str, wait: str) -> Prepared:
        """One SEND_BATCH_MESSAGE's send: ``ids`` are its messages' UNIQ_KEYs joined by commas."""
        props = f"{Prop.WAIT}\x01{wait}\x02"
        return Prepared(topic, body, 0, props, 0, ids, True)

    # -------------------------------------------------------------- sending

    def send(self, prepared: Prepared, *, msg: Message | None = None, queue: MessageQueue | None = None,
             selector: QueueSelector | None = None, arg: Any = None, timeout_ms: int | None = None,
             retries: int | None = None) -> Coroutine[Any, Any, SendResult]:
        """Send with retries on another broker, or once to a pinned or selected queue; either
        waits within the timeout while the topic's (or the queue's) group has no master.

        Returns the send to await; its timeout counts from this call."""
        timeout_ms = timeout_ms or self.options.send_timeout_ms
        deadline = self.clock.monotonic() + timeout_ms / 1000
        if queue is not None or selector is not None:
            return self._send_once(prepared, deadline, msg, queue, selector, arg)
        retries = self.options.retry_times_when_send_failed if retries is None else retries
        return self._send_with_retries(prepared, deadline, timeout_ms, retries)

    async def _send_once(self, prepared: Prepared, deadline: float, msg: Message | None,
                         queue: MessageQueue | None, selector: QueueSelector | None, arg: Any) -> SendResult:
        routes = self.instance.routes
        info = await routes.wait_while_masterless(prepared.topic, lambda: routes.publish_info(prepared.topic),
                                                  self._left_s(deadline))
        mq = queue if queue is not None else self._select(info, selector, msg, arg)  # type: ignore[arg-type]
        await routes.master_for(prepared.topic, mq.broker_name, self._left_s(deadline))
        return await self._attempt(prepared, mq, max(int(self._left_s(deadline) * 1000), 1))

    def _left_s(self, deadline: float) -> float:
        return max(deadline - self.clock.monotonic(), 0.0)

    def _select(self, info: TopicPublishInfo, selector: QueueSelector, msg: Message | None, arg: Any) -> MessageQueue:
        mq = selector(info.queues, msg, arg)  # type: ignore[arg-type]
        if not isinstance(mq, MessageQueue):
            raise MessageValidationError(f"the queue selector returned {mq!r}, not a MessageQueue")
        return mq

    async def _send_with_retries(self, prepared: Prepared, deadline: float, timeout_ms: int,
                                 retries: int) -> SendResult:
        routes = self.instance.routes
        monotonic = self.clock.monotonic
        topic = prepared.topic
        attempts: list[tuple[str, Exception]] = []
        last_broker: str | None = None
        result: SendResult | None = None
        lost: dict[str, str] = {}
        """Group -> the master address whose attempt failed as if it were no longer master."""
        backoff_s = RETRY_BACKOFF_FIRST_S
        attempt = 0
        while attempt <= retries:
            remaining_s = deadline - monotonic()
            if attempt and remaining_s <= 0:
                attempts.append(("-", ClientTimeoutError(f"the send timeout of {timeout_ms} ms passed")))
                break
            info = routes.writable_now(topic)  # the usual case: nothing to fetch or wait for
            if info is None:
                try:
                    info = await routes.writable_publish_info(topic, max(remaining_s, 0.0))
                except NoMasterError as exc:
                    if not attempts:
                        raise
                    attempts.append(("-", exc))
                    break
            mq = self.fault.select(info, last_broker)
            addr = routes.master_addr(mq.broker_name)
            if addr is not None and lost.pop(mq.broker_name, None) == addr:
                # back to the master that just failed (no other group to go to): let the route catch up
                await routes.wait_route_change(topic, min(backoff_s, self._left_s(deadline)))
                backoff_s = min(backoff_s * 2, RETRY_BACKOFF_MAX_S)
                continue
            last_broker = mq.broker_name
            attempt += 1
            # the attempt, as `_attempt` makes it, inline: a coroutine fewer per send
            started = monotonic()
            try:
                request = self._request(prepared, mq, max(int((deadline - started) * 1000), 1), addr)
                result = _send_result(await request, mq, prepared.msg_id)
            except (ResponseError, NoBrokerError, *UNREACHABLE) as exc:
                self._attempt_failed(topic, mq, started, exc)
                if isinstance(exc, ResponseError) and exc.code not in RETRY_ON_ANOTHER_BROKER:
                    raise
                attempts.append((mq.broker_name, exc))
                if addr is not None and _master_may_be_gone(exc):
                    lost[mq.broker_name] = addr
                log.info("send to %s failed (attempt %d of %d): %s", mq, attempt, retries + 1, exc)
                continue
            self.fault.update(mq.broker_name, (monotonic() - started) * 1000, failed=False)
            if result.send_status is _SEND_OK or not self.options.retry_another_broker_when_not_store_ok:
                return result
        if result is not None:
            return result
        raise SendFailedError(topic, attempts) from attempts[-1][1]

    async def _attempt(self, prepared: Prepared, mq: MessageQueue, timeout_ms: int) -> SendResult:
        started = self.clock.monotonic()
        try:
            result = _send_result(await self._request(prepared, mq, timeout_ms), mq, prepared.msg_id)
        except (ResponseError, NoBrokerError, *UNREACHABLE) as exc:
            self._attempt_failed(prepared.topic, mq, started, exc)
            raise
        self.fault.update(mq.broker_name, (self.clock.monotonic() - started) * 1000, failed=False)
        return result

    def _request(self, prepared: Prepared, mq: MessageQueue, timeout_ms: int,
                 addr: str | None = None) -> Awaitable[RemotingCommand]:
        """The attempt's request to the master of ``mq``'s group (``addr`` when the caller has
        just looked it up), to await for the raw answer."""
        if addr is None:
            addr = self.instance.routes.require_master(mq.broker_name)
        return self.instance.api.send_request(addr, _SEND_BATCH if prepared.batch else _SEND_V2,
                                              self._send_ext(prepared, mq), prepared.body, timeout_ms)

    def _attempt_failed(self, topic: str, mq: MessageQueue, started: float, exc: Exception) -> None:
        """Count a failed attempt against its broker; fetch the route again unless the broker
        answered with an error that says nothing about the route."""
        self.fault.update(mq.broker_name, (self.clock.monotonic() - started) * 1000, failed=True)
        if not isinstance(exc, ResponseError) or exc.code in STALE_ROUTE_CODES:
            self.instance.routes.mark_stale(topic)

    def _header(self, prepared: Prepared, mq: MessageQueue) -> SendMessageRequestHeaderV2:
        return SendMessageRequestHeaderV2(
            self.options.group, prepared.topic, TBW102, self.options.default_topic_queue_nums, mq.queue_id,
            prepared.sys_flag, self.clock.now_ms(), prepared.flag, prepared.properties, prepared.reconsume_times,
            False, prepared.batch, prepared.max_reconsume_times, None,
        )

    def _send_ext(self, prepared: Prepared, mq: MessageQueue) -> dict[str, str]:
        """``_header(prepared, mq).to_ext()``, the same keys in the same order, built from a
        copy of the part that is the same for every send of the topic to the queue id."""
        key = (prepared.topic, mq.queue_id)
        head = self._ext_heads.get(key)
        if head is None:
            if len(self._ext_heads) >= _EXT_HEADS_REMEMBERED:
                self._ext_heads.clear()
            head = self._ext_heads[key] = {
                _WIRE["producer_group"]: self.options.group,
                _WIRE["topic"]: prepared.topic,
                _WIRE["default_topic"]: TBW102,
                _WIRE["default_topic_queue_nums"]: str(self.options.default_topic_queue_nums),
                _WIRE["queue_id"]: str(mq.queue_id),
            }
        ext = head.copy()
        ext[_SYS_FLAG] = str(prepared.sys_flag)
        ext[_BORN] = str(self.clock.now_ms())
        ext[_FLAG] = str(prepared.flag)
        ext[_PROPERTIES] = prepared.properties
        if prepared.reconsume_times is not None:
            ext[_RECONSUME_TIMES] = str(prepared.reconsume_times)
        ext[_UNIT_MODE] = "false"
        ext[_BATCH] = "true" if prepared.batch else "false"
        if prepared.max_reconsume_times is not None:
            ext[_MAX_RECONSUME_TIMES] = str(prepared.max_reconsume_times)
        return ext

    async def send_oneway(self, prepared: Prepared, *, msg: Message | None = None, queue: MessageQueue | None = None,
                          selector: QueueSelector | None = None, arg: Any = None) -> None:
        """One attempt with no answer: nothing says whether the broker stored it."""
        info = await self.instance.routes.publish_info(prepared.topic)
        if queue is not None:
            mq = queue
        elif selector is not None:
            mq = self._select(info, selector, msg, arg)
        else:
            mq = self.fault.select(info)
        addr = self.instance.routes.require_master(mq.broker_name)
        code = RequestCode.SEND_BATCH_MESSAGE if prepared.batch else RequestCode.SEND_MESSAGE_V2
        await self.instance.api.send_oneway(addr, code, self._header(prepared, mq), prepared.body)


def _master_may_be_gone(exc: Exception) -> bool:
    """Whether a failed attempt suggests its group's master changed: no answer (dead, or cut
    off), or SERVICE_NOT_AVAILABLE (a slave, or a master without its lease, refusing sends)."""
    if isinstance(exc, ResponseError):
        return exc.code == ResponseCode.SERVICE_NOT_AVAILABLE
    return isinstance(exc, (ConnectionClosed, RequestTimeout))


def make_result(resp: SendResponse, mq: MessageQueue, msg_id: str) -> SendResult:
    h = resp.header
    return SendResult(
        STATUS_BY_CODE[resp.code], msg_id, h.msg_id, MessageQueue(mq.topic, mq.broker_name, h.queue_id),
        h.queue_offset, h.transaction_id, resp.region_id or "DefaultRegion", resp.trace_on != "false",
    )


def _send_result(resp: RemotingCommand, mq: MessageQueue, msg_id: str) -> SendResult:
    """The broker's raw answer to a send as its result (`MQClientAPI.send` and `make_result`
    in one step): an error code raises its error, as `raise_for_response` does."""
    code = resp.code
    if code not in SEND_RESULT_CODES:
        raise error_for(code, resp.remark)
    ext = resp.ext_fields or {}
    h = SendMessageResponseHeader.from_ext(ext)
    queue_id = h.queue_id
    return make_send_result(
        STATUS_BY_CODE[code], msg_id, h.msg_id, mq if queue_id == mq.queue_id and type(mq) is MessageQueue
        else MessageQueue(mq.topic, mq.broker_name, queue_id),
        h.queue_offset, h.transaction_id, ext.get("MSG_REGION") or "DefaultRegion", ext.get("TRACE_ON") != "false",
    )


def _properties(msg: Message, uniq: str) -> str:
    try:
        return send_properties(msg, uniq)
    except MessageIllegalError as exc:
        raise MessageValidationError(exc.remark) from None


def _int_prop(msg: Message, name: str) -> int | None:
    value = msg.properties.get(name)
    try:
        return int(value) if value else None
    except ValueError:
        raise MessageValidationError(f"the property {name}={value!r} is not a whole number") from None
