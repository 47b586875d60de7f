"""MQClientAPI: one typed async method per RPC a client sends (RocketMQ's MQClientAPIImpl).

Each method builds the request from `skiff.protocol` headers and bodies, sends
it over the instance's one `RemotingClient` and decodes the answer; an error
code raises the class `skiff.protocol.errors` maps it to (with the server's
remark). NameServer requests go to one NameServer picked at random and fail
over round-robin when it cannot be reached (`NameServers`); broker requests go
to the address the caller names. Admin RPCs live in `admin_api.AdminAPI`,
which extends this class.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Iterable, Sequence
from typing import NamedTuple

from skiff.client.credentials import Credentials
from skiff.client.errors import NameServerUnavailableError, NotANameServerError
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.protocol.acl_sign import sign_command
from skiff.protocol.bodies.consumer import ConsumerIdList
from skiff.protocol.bodies.heartbeat import CheckClientRequestBody, HeartbeatData
from skiff.protocol.bodies.lock import LockBatchRequestBody, LockBatchResponseBody
from skiff.protocol.bodies.route import ClusterInfo, TopicList, TopicRouteData
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import (
    ConnectionClosed,
    QueryNotFoundError,
    RequestTimeout,
    error_for,
    raise_for_response,
)
from skiff.protocol.headers import consumer as hc
from skiff.protocol.headers.namesrv import GetRouteInfoRequestHeader
from skiff.protocol.headers.pull import PullMessageRequestHeader, PullMessageResponseHeader
from skiff.protocol.headers.query import QueryMessageRequestHeader, ViewMessageRequestHeader
from skiff.protocol.headers.send import SendMessageRequestHeader, SendMessageResponseHeader
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.protocol.message_codec import decode_stored_messages
from skiff.transport.client import RemotingClient
from skiff.transport.errors import TooManyPendingRequests

_OK = (ResponseCode.SUCCESS,)
SEND_RESULT_CODES = (
    ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
)
"""Answers to a send that mean "stored": the SendResult carries the caveat as its status."""
PULL_RESULT_CODES = (
    ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
    ResponseCode.PULL_OFFSET_MOVED,
)
"""Answers to a pull that are statuses, not errors."""

UNREACHABLE = (ConnectionClosed, RequestTimeout, TooManyPendingRequests)
"""Failures that say nothing about the request, only that the server did not answer."""
NAMESRV_REQUESTS = frozenset({RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO,
                              RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER})
"""Requests every NameServer serves: a server that answers one as unsupported is no NameServer
(a broker, whose port was given instead)."""


class NameServers:
    """A NameServer list: one picked at random, the next one in turn after a failure."""

    def __init__(self, addrs: Sequence[str], rng: random.Random | None = None) -> None:
        if not addrs:
            raise ValueError("a NameServer list needs at least one address")
        self._addrs = tuple(addrs)
        self._index = (rng or random).randrange(len(self._addrs))

    @property
    def addrs(self) -> tuple[str, ...]:
        return self._addrs

    @property
    def current(self) -> str:
        return self._addrs[self._index]

    def in_order(self) -> list[str]:
        """Every address, the current one first, then round-robin."""
        n = len(self._addrs)
        return [self._addrs[(self._index + i) % n] for i in range(n)]

    def failed(self, addr: str) -> None:
        """Move past ``addr`` if it is the current one."""
        if self.current == addr:
            self._index = (self._index + 1) % len(self._addrs)


class SendResponse(NamedTuple):
    """A send's code (SUCCESS or a stored-with-caveat code), header and Java's extra fields."""

    code: int
    header: SendMessageResponseHeader
    region_id: str | None = None
    trace_on: str | None = None


class PullResponse(NamedTuple):
    """A pull's code (SUCCESS, PULL_NOT_FOUND, ...), header and raw body of stored records."""

    code: int
    header: PullMessageResponseHeader
    body: bytes | bytearray | memoryview


class MQClientAPI:
    """Typed RPCs over one `RemotingClient`; ``timeout_ms`` defaults to ``request_timeout_ms``."""

    def __init__(self, remoting: RemotingClient, namesrvs: NameServers, request_timeout_ms: int = 3000,
                 language: str = "PYTHON", credentials: Credentials | None = None) -> None:
        self.remoting = remoting
        self.namesrvs = namesrvs
        self.request_timeout_ms = request_timeout_ms
        self.language = language
        """What every request says it is written in (brokers list it with the client's connection)."""
        self.credentials = credentials
        """When set, every request is signed (RocketMQ's AclClientRPCHook; docs/acl.md)."""

    # ------------------------------------------------------------ plumbing

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_ms: int | None = None,
                     expected: Iterable[int] = _OK) -> RemotingCommand:
        """Send ``cmd`` to ``addr``; raise the response code's error unless it is ``expected``."""
        self._prepare(cmd)
        resp = await self.remoting.invoke(addr, cmd, timeout_ms or self.request_timeout_ms)
        return raise_for_response(resp, expected)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self._prepare(cmd)
        await self.remoting.invoke_oneway(addr, cmd)

    def _prepare(self, cmd: RemotingCommand) -> None:
        """Say the client's language and sign: the last touch before a request leaves."""
        cmd.language = self.language
        if self.credentials is not None:
            creds = self.credentials
            sign_command(cmd, creds.access_key, creds.secret_key, creds.security_token)

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout_ms: int | None = None,
                             expected: Iterable[int] = _OK) -> RemotingCommand:
        """Ask the current NameServer; on no answer, the next ones in turn.

        An error code is the NameServer's answer and is raised at once, except
        REQUEST_CODE_NOT_SUPPORTED to a request every NameServer serves: that server is no
        NameServer, and when no other answers, `NotANameServerError` says so.
        """
        errors: dict[str, Exception] = {}
        not_namesrvs: list[str] = []
        self._prepare(cmd)
        for addr in self.namesrvs.in_order():
            try:
                resp = await self.remoting.invoke(addr, cmd, timeout_ms or self.request_timeout_ms)
            except UNREACHABLE as exc:
                errors[addr] = exc
                self.namesrvs.failed(addr)
                continue
            if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and cmd.code in NAMESRV_REQUESTS:
                errors[addr] = error_for(resp.code, resp.remark)  # a broker's port in the list: ask the others
                not_namesrvs.append(addr)
                self.namesrvs.failed(addr)
                continue
            return raise_for_response(resp, expected)
        if not_namesrvs:
            raise NotANameServerError(errors, not_namesrvs, cmd.code)
        raise NameServerUnavailableError(errors)

    # ---------------------------------------------------------- NameServer

    async def get_topic_route(self, topic: str, timeout_ms: int | None = None) -> TopicRouteData | None:
        """The topic's route, or None when no NameServer knows it (TOPIC_NOT_EXIST or no body)."""
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic).to_ext())
        resp = await self.invoke_namesrv(cmd, timeout_ms, (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            return None
        return TopicRouteData.from_json(resp.body)

    async def get_cluster_info(self, timeout_ms: int | None = None) -> ClusterInfo:
        resp = await self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout_ms)
        return ClusterInfo.from_json(resp.body) if resp.body else ClusterInfo()

    async def get_topic_list(self, timeout_ms: int | None = None) -> list[str]:
        cmd = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        resp = await self.invoke_namesrv(cmd, timeout_ms)
        return list(TopicList.from_json(resp.body).topic_list) if resp.body else []

    # -------------------------------------------------------------- sending

    async def send(self, addr: str, code: int, header: SendMessageRequestHeader, body: bytes,
                   timeout_ms: int | None = None) -> SendResponse:
        """SEND_MESSAGE(_V2) or SEND_BATCH_MESSAGE; the header's class decides the key names."""
        resp = raise_for_response(await self.send_request(addr, code, header.to_ext(), body, timeout_ms),
                                  SEND_RESULT_CODES)
        ext = resp.ext_fields or {}
        return SendResponse(resp.code, SendMessageResponseHeader.from_ext(ext), ext.get("MSG_REGION"),
                            ext.get("TRACE_ON"))

    def send_request(self, addr: str, code: int, ext: dict[str, str], body: bytes,
                     timeout_ms: int | None = None) -> Awaitable[RemotingCommand]:
        """`send` without reading the answer: awaiting what it returns sends the request
        (``ext``: the send header's extFields, every value a string) and gives the broker's
        answer as it came, error codes too (`send` checks and decodes it; the producer's hot
        path does that itself, a coroutine fewer per send). Unsigned, it is written at once and no
        command is made for it (`RemotingClient.request_json`); a signed one is a command."""
        if self.credentials is None:
            return self.remoting.request_json(addr, int(code), self.language, ext, body,
                                              timeout_ms or self.request_timeout_ms)
        cmd = RemotingCommand(int(code), ext_fields=ext, body=body)
        self._prepare(cmd)
        return self.remoting.invoke(addr, cmd, timeout_ms or self.request_timeout_ms)

    async def send_oneway(self, addr: str, code: int, header: SendMessageRequestHeader, body: bytes) -> None:
        cmd = RemotingCommand.request(code, None, body, oneway=True)
        cmd.ext_fields = header.to_ext()
        await self.invoke_oneway(addr, cmd)

    async def end_transaction(self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None) -> None:
        """END_TRANSACTION, sent oneway as every RocketMQ client does."""
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext(), oneway=True)
        cmd.remark = remark
        await self.invoke_oneway(addr, cmd)

    # -------------------------------------------------------------- pulling

    async def pull(self, addr: str, header: PullMessageRequestHeader, timeout_ms: int | None = None) -> PullResponse:
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms, PULL_RESULT_CODES)
        return PullResponse(resp.code, PullMessageResponseHeader.from_ext(resp.ext_fields), resp.body)

    async def consumer_send_msg_back(self, addr: str, header: hc.ConsumerSendMsgBackRequestHeader,
                                     timeout_ms: int | None = None) -> None:
        await self.invoke(addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext()),
                          timeout_ms)

    # ---------------------------------------------------------------- offsets

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue,
                                    timeout_ms: int | None = None) -> int | None:
        """The group's committed offset of ``mq``, or None when the broker has none (QUERY_NOT_FOUND)."""
        header = hc.QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, mq.broker_name)
        cmd = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return hc.OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int, *,
                                     oneway: bool = False, timeout_ms: int | None = None) -> None:
        header = hc.UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset, mq.broker_name)
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext(), oneway=oneway)
        if oneway:
            await self.invoke_oneway(addr, cmd)
        else:
            await self.invoke(addr, cmd, timeout_ms)

    async def _queue_offset(self, code: int, addr: str, mq: MessageQueue, timeout_ms: int | None) -> int:
        header = hc.QueueRequestHeader(mq.topic, mq.queue_id, mq.broker_name)
        resp = await self.invoke(addr, RemotingCommand.request(code, header.to_ext()), timeout_ms)
        return hc.OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout_ms: int | None = None) -> int:
        """The offset the next message of ``mq`` will get (its ConsumeQueue entry count)."""
        return await self._queue_offset(RequestCode.GET_MAX_OFFSET, addr, mq, timeout_ms)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout_ms: int | None = None) -> int:
        return await self._queue_offset(RequestCode.GET_MIN_OFFSET, addr, mq, timeout_ms)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int,
                            timeout_ms: int | None = None) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms``."""
        header = hc.SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms, mq.broker_name)
        cmd = RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms)
        return hc.OffsetResponseHeader.from_ext(resp.ext_fields).offset

    async def get_earliest_msg_store_time(self, addr: str, mq: MessageQueue, timeout_ms: int | None = None) -> int:
        header = hc.QueueRequestHeader(mq.topic, mq.queue_id, mq.broker_name)
        cmd = RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms)
        return hc.GetEarliestMsgStoretimeResponseHeader.from_ext(resp.ext_fields).timestamp

    # ------------------------------------------------------ client management

    async def heartbeat(self, addr: str, data: HeartbeatData, timeout_ms: int | None = None) -> None:
        await self.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, None, data.to_json()), timeout_ms)

    async def check_client_config(self, addr: str, body: CheckClientRequestBody,
                                  timeout_ms: int | None = None) -> None:
        """Raises the broker's refusal of the subscription (SUBSCRIPTION_PARSE_FAILED, SYSTEM_ERROR)."""
        await self.invoke(addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, None, body.to_json()),
                          timeout_ms)

    async def unregister_client(self, addr: str, client_id: str, *, producer_group: str | None = None,
                                consumer_group: str | None = None, timeout_ms: int | None = None) -> None:
        header = hc.UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self.invoke(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext()), timeout_ms)

    async def get_consumer_id_list(self, addr: str, group: str, timeout_ms: int | None = None) -> list[str]:
        """The client ids of the group's live consumers as this broker knows them."""
        header = hc.GetConsumerListByGroupRequestHeader(group)
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                               header.to_ext()), timeout_ms)
        return list(ConsumerIdList.from_json(resp.body).consumer_id_list) if resp.body else []

    async def lock_batch_mq(self, addr: str, body: LockBatchRequestBody,
                            timeout_ms: int | None = None) -> set[MessageQueue]:
        """Lock the queues for an orderly consumer; returns the ones this client now holds."""
        resp = await self.invoke(addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, body.to_json()),
                                 timeout_ms)
        return set(LockBatchResponseBody.from_json(resp.body).lock_ok_mq_set) if resp.body else set()

    async def unlock_batch_mq(self, addr: str, body: LockBatchRequestBody, *, oneway: bool = False,
                              timeout_ms: int | None = None) -> None:
        cmd = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body.to_json(), oneway=oneway)
        if oneway:
            await self.invoke_oneway(addr, cmd)
        else:
            await self.invoke(addr, cmd, timeout_ms)

    # -------------------------------------------------------------- queries

    async def view_message(self, addr: str, commit_log_offset: int,
                           timeout_ms: int | None = None) -> StoredMessage:
        """The message stored at ``commit_log_offset`` on the broker at ``addr``."""
        cmd = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID,
                                      ViewMessageRequestHeader(commit_log_offset).to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms)
        messages = decode_stored_messages(resp.body)
        if not messages:
            raise QueryNotFoundError(f"no message at CommitLog offset {commit_log_offset} on {addr}")
        return messages[0]

    async def query_message(self, addr: str, header: QueryMessageRequestHeader,
                            timeout_ms: int | None = None) -> list[StoredMessage]:
        """Messages indexed under a key (or a unique id); [] when the broker finds none."""
        cmd = RemotingCommand.request(RequestCode.QUERY_MESSAGE, header.to_ext())
        resp = await self.invoke(addr, cmd, timeout_ms, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        if resp.code == ResponseCode.QUERY_NOT_FOUND or not resp.body:
            return []
        return decode_stored_messages(resp.body)
