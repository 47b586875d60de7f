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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from skiff.broker.config import BrokerConfig
from skiff.broker.operations import Refusal, SendOperation, SendRequest, Sent, born_host
from skiff.broker.operations.send import CLIENT_FLAGS
from skiff.broker.operations.send_requests import NOT_PLAIN, PLAIN_INDEXED, PlainSends, send_plain, send_requests
from skiff.common import kernels
from skiff.common.errors import SkiffError
from skiff.common.properties import decode_properties
from skiff.protocol.codes import SKIFF_VERSION, RequestCode, ResponseCode, SerializeType
from skiff.protocol.command import RPC_TYPE_RESPONSE, RemotingCommand
from skiff.protocol.frame import answer_frame, json_head_py
from skiff.protocol.headers.send import SendMessageRequestHeader, decode_send_request, send_fields, send_fields_py
from skiff.store import MessageInput, PutResult, PutStatus
from skiff.store.dispatcher import NOT_CONSUMABLE
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

_SUCCESS = ResponseCode.SUCCESS  # named once (an enum member through its class costs a metaclass hook)

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
        """The sends one read brought, appended together per queue, each answered with its
        frame encoded at once (no command per answer). A read of plain single sends (what
        producers send) is read into store rows in one compiled pass (`plain_sends`) and its
        answers encoded per stored run (`sent_answers`); any other read goes request by request
        (`send_requests`), where a header that does not decode fails its own request only. Both
        keep a topic's duplicate window (skiff/broker/dedup.py): a run's sends whose UNIQ_KEY it
        holds are answered each with its original, the others appended together."""
        host = born_host(conn.peer)
        plain = plain_sends(reqs, host, MessageInput, CLIENT_FLAGS, NOT_CONSUMABLE, NOT_PLAIN, PLAIN_INDEXED)
        if plain is not None:
            return self._send_plain(reqs, plain)
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
        if len(requests) == 1:  # the operation's own path
            outcomes = [self.operation.send(r, self.frame_to(reqs[i])) for i, r in zip(taken, requests)]
        else:
            outcomes = send_requests(self.operation, requests, [self.frame_to(reqs[i]) for i in taken])
        for i, sent in zip(taken, outcomes):
            out[i] = answer_frame(reqs[i], sent.code, sent.reason, {}) if isinstance(sent, Refusal) else sent
        return out

    def _send_plain(self, reqs: list[RemotingCommand], plain: PlainSends) -> list[BatchResult]:
        out: list[Any] = [None] * len(reqs)
        extra = self._extra

        def answer_run(members: list[int], result: PutResult, queue_id: int, into: list[Any]) -> None:
            if sent_answers(reqs, members, result.offset_msg_ids, queue_id, result.queue_offset, _SUCCESS,
                            "PYTHON", SKIFF_VERSION, RPC_TYPE_RESPONSE, extra, into):
                for k, i in enumerate(members):  # those not in JSON
                    if into[i] is None:
                        into[i] = answer_frame(reqs[i], *put_fields(Sent(result, queue_id, k), extra))

        def refuse(i: int, refusal: Refusal) -> None:
            out[i] = answer_frame(reqs[i], refusal.code, refusal.reason, {})

        send_plain(self.operation, plain, lambda i: self.frame_to(reqs[i]), answer_run, refuse, out)
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


def plain_sends_py(reqs: Sequence[RemotingCommand], host: bytes, row_cls: type[MessageInput], client_flags: int,
                   not_consumable: int, refused: Sequence[str], indexed: Sequence[str]) -> PlainSends | None:
    """The store rows of a read of plain single sends (`send_requests.send_plain`), grouped by
    (topic, queue id) in first-arrival order, or None when one send is not plain: a header
    `send_fields` does not read, a batch, any queue (-1), a ``not_consumable`` sysFlag, a
    ``refused`` property, a body that is not bytes, properties that do not encode, or one queue
    named with two templates. Each row is the one `SendOperation.prepare` would make of the
    send (``indexed``: TAGS, KEYS, UNIQ_KEY, then WAIT, whose value "false" means no wait);
    the compiled twin in `skiff.protocol._frames` reads the properties without a dict."""
    groups: dict[tuple[str, int], list[Any]] = {}
    rows: list[MessageInput] = []
    waits: list[bool] = []
    tags, keys, uniq_key, wait = indexed
    for i, req in enumerate(reqs):
        f = send_fields_py(req.code, req.ext_fields)
        if f is None:
            return None
        topic, queue_id, properties, flag, sys_flag, born_ms, reconsume_times, batch, template, queue_nums = f
        body = req.body
        if batch or queue_id < 0 or sys_flag & not_consumable or type(body) is not bytes:
            return None
        try:
            raw = properties.encode()
        except UnicodeEncodeError:
            return None
        props = decode_properties(properties) if properties else {}
        if any(name in props for name in refused):
            return None
        row = row_cls(topic, queue_id, body, raw, flag, sys_flag & client_flags, born_ms, host, reconsume_times, 0,
                      props.get(tags), props.get(keys), props.get(uniq_key))
        rows.append(row)
        waits.append(props.get(wait) != "false")
        group = groups.get((topic, queue_id))
        if group is None:
            groups[(topic, queue_id)] = [template, queue_nums, [i], [row], len(body)]
            continue
        if group[0] != template or group[1] != queue_nums:
            return None
        group[2].append(i)
        group[3].append(row)
        group[4] += len(body)
    return groups, rows, waits


def sent_answers_py(reqs: Sequence[RemotingCommand], indices: Sequence[int], ids: Sequence[str], queue_id: int,
                    first_offset: int, code: int, language: str, version: int, flag: int, extra: Mapping[str, str],
                    out: list[Any]) -> int:
    """The answer frames of the sends of one stored run, into ``out`` at each request's index:
    the k-th gets ``ids[k]`` and queue offset ``first_offset + k`` (`put_fields`' extFields,
    then ``extra``), as `answer_frame` encodes them. A request not in JSON is left for the
    caller (`answer_frame` encodes the ROCKETMQ layout); returns how many were left."""
    if not {"msgId", "queueId", "queueOffset"}.isdisjoint(extra):
        raise ValueError("sent_answers takes extra fields of str, other than the three it writes")
    left = 0
    for k, i in enumerate(indices):
        req = reqs[i]
        if req.serialize_type != SerializeType.JSON:
            left += 1
            continue
        ext = {"msgId": ids[k], "queueId": str(queue_id), "queueOffset": str(first_offset + k), **extra}
        out[i] = json_head_py(int(SerializeType.JSON), code, language, version, req.opaque, flag, None, ext, 0)
    return left


plain_sends = kernels.select("plain_sends", plain_sends_py, "skiff.protocol._frames")
sent_answers = kernels.select("sent_answers", sent_answers_py, "skiff.protocol._frames")
