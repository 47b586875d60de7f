"""A protocol-level client of brokers for tests and the broker benchmark.

It builds requests the way RocketMQ's clients build them (headers from
`skiff.protocol.headers`, bodies from `skiff.protocol.bodies`) and hands back the
raw response, so tests can assert on codes, remarks and bytes. It is not the
client library (`skiff.client`): no routing, retries or rebalancing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from skiff.common.message import Message, MessageQueue
from skiff.common.msgid import UNIQ_IDS
from skiff.common.names import TBW102, is_retry_topic
from skiff.common.stored_message import StoredMessage
from skiff.common.sysflag import PullSysFlag
from skiff.protocol.bodies.admin import KVTable
from skiff.protocol.bodies.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from skiff.protocol.bodies.lock import LockBatchRequestBody, LockBatchResponseBody
from skiff.protocol.codes import PopRequestCode, RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.pop import (
    NORMAL_TOPIC,
    RETRY_TOPIC,
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from skiff.protocol.headers.pull import PullMessageRequestHeader
from skiff.protocol.headers.send import SendMessageRequestHeader, SendMessageRequestHeaderV2
from skiff.protocol.message_codec import compress_body, decode_stored_messages, encode_batch, send_properties
from skiff.transport import RemotingClient
from skiff.transport.connection import Handler
from skiff.transport.loop import run_coroutine
from skiff.transport.tls import TlsClientConfig

TIMEOUT_MS = 10_000


class BrokerWire:
    """Requests to one broker at ``addr`` over one `RemotingClient` connection."""

    def __init__(self, addr: str, *, handlers: Mapping[int, Handler] | None = None,
                 timeout_ms: int = TIMEOUT_MS, broker_name: str = "broker-a",
                 tls: TlsClientConfig | None = None) -> None:
        """``tls``: connect with TLS (a broker in tls.server.mode=enforcing)."""
        self.addr = addr
        self.broker_name = broker_name
        self.client = RemotingClient(handlers, tls=tls)
        self.timeout_ms = timeout_ms

    async def close(self) -> None:
        await self.client.close()

    async def call(self, code: int, ext: Mapping[str, object] | None = None, body: bytes = b"", *,
                   timeout_ms: int | None = None) -> RemotingCommand:
        cmd = RemotingCommand.request(code, ext, body)
        return await self.client.invoke(self.addr, cmd, timeout_ms or self.timeout_ms)

    async def runtime(self) -> dict[str, str]:
        """The broker's runtime table (GET_BROKER_RUNTIME_INFO): offsets and HA state for tests to wait on."""
        resp = await self.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return dict(KVTable.from_json(resp.body).table)

    async def max_offset(self) -> int:
        """The CommitLog's max offset: a slave has caught up when it equals its master's."""
        return int((await self.runtime())["commitLogMaxOffset"])

    # -- sending --------------------------------------------------------------

    async def send(self, message: Message, *, queue_id: int = 0, code: int = RequestCode.SEND_MESSAGE_V2,
                   group: str = "PG", sys_flag: int = 0, compress: bool = False,
                   reconsume_times: int = 0) -> RemotingCommand:
        """Send one message as a Java client does (a fresh UNIQ_KEY, WAIT=true)."""
        body, sys_flag = compress_body(message.body, sys_flag) if compress else (message.body, sys_flag)
        props = send_properties(message, UNIQ_IDS.next_id())
        return await self.call(code, send_header(code, message.topic, queue_id, props, group=group,
                                                 sys_flag=sys_flag, reconsume_times=reconsume_times), body)

    async def send_batch(self, topic: str, messages: Sequence[Message], *, queue_id: int = 0,
                         code: int = RequestCode.SEND_BATCH_MESSAGE, compress: bool = False,
                         group: str = "PG") -> RemotingCommand:
        """A batch: Java's SEND_BATCH_MESSAGE, or the C++ client's code 10 with ``batch``."""
        body, sys_flag = encode_batch(messages, UNIQ_IDS.next_id), 0
        if compress:
            body, sys_flag = compress_body(body, sys_flag, over_bytes=0)
        header = send_header(code, topic, queue_id, "", group=group, sys_flag=sys_flag, batch=True)
        return await self.call(code, header, body)

    # -- consuming ------------------------------------------------------------

    async def pull(self, group: str, topic: str, queue_id: int, offset: int, *, max_nums: int = 32,
                   subscription: str | None = "*", expression_type: str | None = None, suspend_ms: int = 0,
                   commit_offset: int | None = None, timeout_ms: int | None = None) -> RemotingCommand:
        sys_flag = 0
        if subscription is not None:
            sys_flag |= PullSysFlag.SUBSCRIPTION
        if suspend_ms:
            sys_flag |= PullSysFlag.SUSPEND
        if commit_offset is not None:
            sys_flag |= PullSysFlag.COMMIT_OFFSET
        header = PullMessageRequestHeader(group, topic, queue_id, offset, max_nums, int(sys_flag),
                                          commit_offset or 0, suspend_ms, 0, subscription, expression_type)
        return await self.call(RequestCode.PULL_MESSAGE, header.to_ext(),
                               timeout_ms=timeout_ms or self.timeout_ms + suspend_ms)

    async def pull_messages(self, group: str, topic: str, queue_id: int, offset: int = 0,
                            **kwargs: object) -> list[StoredMessage]:
        """Every message from ``offset`` to the end of the queue, pulling until none is left."""
        out: list[StoredMessage] = []
        while True:
            resp = await self.pull(group, topic, queue_id, offset, **kwargs)  # type: ignore[arg-type]
            if resp.code == ResponseCode.SUCCESS:
                out += decode_stored_messages(resp.body)
            elif resp.code != ResponseCode.PULL_RETRY_IMMEDIATELY:
                return out
            offset = int(resp.ext("nextBeginOffset") or 0)

    # -- POP (RocketMQ 5.x) ------------------------------------------------------------

    async def pop(self, group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
                  invisible_ms: int = 60_000, poll_ms: int = 0, expression: str | None = None,
                  expression_type: str | None = None, order: bool = False,
                  attempt_id: str | None = None) -> tuple[RemotingCommand, list[tuple[StoredMessage, ExtraInfo]]]:
        """POP_MESSAGE, and each message found with the handle a 5.x client builds from the
        response's pop time, invisible time, revive queue id and start offsets."""
        header = PopMessageRequestHeader(group, topic, queue_id, max_nums, invisible_ms, poll_ms,
                                         int(time.time() * 1000), 1, expression_type, expression, order, attempt_id)
        resp = await self.call(PopRequestCode.POP_MESSAGE, header.to_ext(), timeout_ms=self.timeout_ms + poll_ms)
        if resp.code != ResponseCode.SUCCESS:
            return resp, []
        h = PopMessageResponseHeader.from_ext(resp.ext_fields)
        starts = {(int(k), int(q)): int(v) for k, q, v in (e.split(" ") for e in (h.start_offset_info or "").split(";"))}
        out = []
        for m in decode_stored_messages(resp.body):
            kind = RETRY_TOPIC if is_retry_topic(m.topic) else NORMAL_TOPIC
            handle = ExtraInfo(starts[(kind, m.queue_id)], h.pop_time, h.invisible_time, h.revive_qid, kind,
                               self.broker_name, m.queue_id,
                               m.queue_offset)
            out.append((m, handle))
        return resp, out

    async def ack(self, group: str, topic: str, handle: ExtraInfo) -> RemotingCommand:
        header = AckMessageRequestHeader(group, topic, handle.queue_id, handle.encode(), handle.queue_offset)
        return await self.call(PopRequestCode.ACK_MESSAGE, header.to_ext())

    async def change_invisible(self, group: str, topic: str, handle: ExtraInfo,
                               invisible_ms: int) -> RemotingCommand:
        header = ChangeInvisibleTimeRequestHeader(group, topic, handle.queue_id, handle.encode(),
                                                  handle.queue_offset, invisible_ms)
        return await self.call(PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())

    async def heartbeat(self, client_id: str, *, consumers: Iterable[ConsumerData] = (),
                        producers: Iterable[str] = ()) -> RemotingCommand:
        data = HeartbeatData(client_id, tuple(ProducerData(g) for g in producers), tuple(consumers))
        return await self.call(RequestCode.HEART_BEAT, None, data.to_json())

    async def lock(self, group: str, client_id: str, queues: Sequence[MessageQueue]) -> list[MessageQueue]:
        resp = await self.call(RequestCode.LOCK_BATCH_MQ, None,
                               LockBatchRequestBody(group, client_id, tuple(queues)).to_json())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return list(LockBatchResponseBody.from_json(resp.body).lock_ok_mq_set)


def send_header(code: int, topic: str, queue_id: int, properties: str, *, group: str = "PG", sys_flag: int = 0,
                batch: bool = False, reconsume_times: int = 0, queue_nums: int = 4) -> dict[str, str]:
    """The extFields of a send on ``code`` (V1 names on 10, V2's one-letter keys on 310/320)."""
    header = SendMessageRequestHeader(group, topic, TBW102, queue_nums, queue_id, sys_flag, int(time.time() * 1000),
                                      0, properties, reconsume_times, False, batch)
    if code != RequestCode.SEND_MESSAGE:
        header = SendMessageRequestHeaderV2.from_v1(header)
    return header.to_ext()


def consumer(group: str, *topics: str, expression: str = "*", model: MessageModel = MessageModel.CLUSTERING,
             consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY) -> ConsumerData:
    """A heartbeat's ConsumerData subscribing ``group`` to ``topics`` with one tag expression."""
    subs = tuple(SubscriptionData(t, expression) for t in topics)
    return ConsumerData(group, consume_type, model, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, subs)


def with_wire(addr: str, test: Callable[[BrokerWire], Awaitable[None]]) -> None:
    """Run ``await test(wire)`` on a fresh event loop with a `BrokerWire` to ``addr``, closed after."""
    async def main() -> None:
        wire = BrokerWire(addr)
        try:
            await test(wire)
        finally:
            await wire.close()
    run_coroutine(main())
