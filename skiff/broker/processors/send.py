"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

Every code is one path, the remoting adapter of `skiff.broker.operations.send`: the
header says which topic and queue, the ``batch`` / ``m`` field says whether the body
is one message or a batch (the C++ client sends batches on code 10 with ``batch`` =
"1", zlib-compressed as a whole when sysFlag bit 0 is set: it is inflated, then
split). The checks are the gate's (`skiff.broker.operations.gate`), with
auto-creation from the template topic the producer names (TBW102); the store's
status becomes the response code.

The handler is synchronous, so the transport answers in the loop step that read
the request, except under SYNC_FLUSH, where the answer waits for the fsync that
covers the message (group commit), and under SYNC_MASTER, where it waits for a
slave's acknowledgement (a `LateAnswer` the acknowledgement's callback gives).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from skiff.broker.config import BrokerConfig
from skiff.broker.operations import Refusal, SendOperation, SendRequest, Sent, born_host
from skiff.broker.operations.send_requests import send_requests
from skiff.common.errors import SkiffError
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from skiff.protocol.frame import answer_frame
from skiff.protocol.headers.send import SendMessageRequestHeader, decode_send_request, send_fields
from skiff.store import PutStatus
from skiff.transport.connection import Batched, BatchResult, Connection, Handler
from skiff.transport.late import LateAnswer

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

Answered = RemotingCommand | LateAnswer[RemotingCommand] | Awaitable[RemotingCommand]


class SendProcessor:
    """The remoting adapter of `SendOperation`: the header in, the send result's fields out."""

    def __init__(self, config: BrokerConfig, operation: SendOperation) -> None:
        self.operation = operation
        self._extra = {"MSG_REGION": config.region_id, "TRACE_ON": "true" if config.trace_on else "false"}

    def handlers(self) -> dict[int, Handler]:
        handler = Batched(self.send, self.send_all)
        return {
            RequestCode.SEND_MESSAGE: handler,
            RequestCode.SEND_MESSAGE_V2: handler,
            RequestCode.SEND_BATCH_MESSAGE: handler,
        }

    def send(self, conn: Connection, req: RemotingCommand) -> Answered:
        sent = self.operation.send(request_of(req, born_host(conn.peer)), self.answer_to(req))
        return req.response(sent.code, sent.reason) if isinstance(sent, Refusal) else sent

    def send_all(self, conn: Connection, reqs: list[RemotingCommand]) -> list[BatchResult]:
        """The sends one read brought, appended together per queue (`send_requests`), each
        answered with its frame encoded at once (`answer_frame`, no command per answer); a
        header that does not decode fails its own request only."""
        host = born_host(conn.peer)
        out: list[BatchResult] = [None] * len(reqs)
        requests: list[SendRequest] = []
        taken: list[int] = []
        for i, req in enumerate(reqs):
            try:
                requests.append(request_of(req, host))
            except SkiffError as exc:
                out[i] = answer_frame(req, ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__, {})
                continue
            taken.append(i)
        if len(requests) == 1:  # a lone send: nothing to share, the operation's own path
            outcomes = [self.operation.send(requests[0], self.frame_to(reqs[taken[0]]))]
        else:
            outcomes = send_requests(self.operation, requests, [self.frame_to(reqs[i]) for i in taken])
        for i, sent in zip(taken, outcomes):
            out[i] = answer_frame(reqs[i], sent.code, sent.reason, {}) if isinstance(sent, Refusal) else sent
        return out

    def answer_to(self, req: RemotingCommand) -> Callable[[Sent], RemotingCommand]:
        """How a stored send of ``req`` is answered (called once, when it is settled)."""
        extra = self._extra
        return lambda sent: put_response(req, sent, extra)

    def frame_to(self, req: RemotingCommand) -> Callable[[Sent], bytes]:
        """`answer_to`, as the answer's encoded frame (the batched path's)."""
        extra = self._extra
        return lambda sent: answer_frame(req, *put_fields(sent, extra))


def request_of(req: RemotingCommand, host: bytes) -> SendRequest:
    """The `SendRequest` of a send: its header read straight (`send_fields`), or decoded as a header
    object where it is not plain (raises `HeaderError` when it does not decode)."""
    body = req.body if type(req.body) is bytes else bytes(req.body)
    f = send_fields(req.code, req.ext_fields)
    if f is None:
        return send_request(decode_send_request(req.code, req.ext_fields), body, host)
    topic, queue_id, properties, flag, sys_flag, born_ms, reconsume_times, batch, template, queue_nums = f
    return SendRequest(topic, queue_id, body, properties, flag, sys_flag, born_ms, host, reconsume_times, batch,
                       template, queue_nums)


def send_request(h: SendMessageRequestHeader, body: bytes, host: bytes) -> SendRequest:
    return SendRequest(
        topic=h.topic, queue_id=h.queue_id, body=body, properties=h.properties or "", flag=h.flag,
        sys_flag=h.sys_flag, born_ms=h.born_timestamp, born_host=host, reconsume_times=h.reconsume_times or 0,
        batch=h.batch, template=h.default_topic, template_queue_nums=h.default_topic_queue_nums)


def put_fields(sent: Sent, extra: dict[str, str] | None = None) -> tuple[int, str | None, dict[str, str]]:
    """The code, remark and extFields of the answer to a send (or send-back), from what the
    store made of it."""
    result = sent.result
    code = STATUS_CODES[result.status]
    if code not in _WITH_RESULT:
        return code, result.reason or result.status.name, {}
    ext = {
        "msgId": ",".join(sent.msg_ids),
        "queueId": str(sent.queue_id),
        "queueOffset": str(sent.queue_offset),
    }
    if extra:
        ext.update(extra)
    return code, result.reason or None, ext


def put_response(req: RemotingCommand, sent: Sent, extra: dict[str, str] | None = None) -> RemotingCommand:
    """The response to a send (or send-back), built as the command itself (its fields are strings
    already)."""
    code, remark, ext = put_fields(sent, extra)
    return RemotingCommand(code=code, opaque=req.opaque, flag=RPC_TYPE_RESPONSE, ext_fields=ext, remark=remark,
                           serialize_type=req.serialize_type)
