"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053):
RocketMQ 5.x's POP consumption over remoting, an adapter over
`skiff.broker.operations.pop.PopOperation` (which the gRPC consumer handlers share).

The operation's checks and codes: the gate's (the group, the broker's and the topic's
read permission, the topic, the queue id), ``maxMsgNums`` (1 to 32) and
``invisibleTime`` (MESSAGE_ILLEGAL), the filter (as a pull's). A pop that finds nothing
answers POLLING_TIMEOUT after waiting ``pollTime`` ms, or NO_MESSAGE at once without
one; POLLING_FULL when ``maxPopPollingSize`` pops wait already, SERVICE_NOT_AVAILABLE
when the broker shuts down meanwhile. Found: SUCCESS, the records back to back in the
body (the retry topic's copies keep that topic; ``RETRY_TOPIC`` names the original)
and the offset infos the client builds handles from (`skiff.protocol.headers.pop`).
An ack or change whose handle names nothing in flight gets NO_MESSAGE; a handle that
does not parse or disagrees with the header's queue and offset, MESSAGE_ILLEGAL.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable

from skiff.broker.operations import ANY_QUEUE, Refusal
from skiff.broker.operations.pop import AckRequest, ChangeInvisibleRequest, PopOperation, PopOutcome, PopRequest
from skiff.common.errors import DecodeError
from skiff.protocol.codes import PopRequestCode, PopResponseCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    offset_info,
)
from skiff.transport.connection import Connection, Handler


class PopProcessor:
    def __init__(self, pop: PopOperation) -> None:
        self.operation = pop

    def handlers(self) -> dict[int, Handler]:
        return {PopRequestCode.POP_MESSAGE: self.pop, PopRequestCode.ACK_MESSAGE: self.ack,
                PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible}

    def pop(self, conn: Connection, req: RemotingCommand) -> Awaitable[RemotingCommand]:
        h = PopMessageRequestHeader.from_ext(req.ext_fields)
        request = PopRequest(h.consumer_group, h.topic, ANY_QUEUE if h.queue_id == -1 else h.queue_id,
                             h.max_msg_nums, h.invisible_time, max(0, h.poll_time), h.exp or "*", h.exp_type,
                             bool(h.order), h.attempt_id or "", h.init_mode)
        return self._answer(req, request)

    async def _answer(self, req: RemotingCommand, request: PopRequest) -> RemotingCommand:
        outcome = await self.operation.pop(request)
        if isinstance(outcome, Refusal):
            return req.response(outcome.code, outcome.reason)
        if not outcome.messages:
            if request.poll_ms:
                return req.response(PopResponseCode.POLLING_TIMEOUT, "no new message within the poll time")
            return req.response(PopResponseCode.NO_MESSAGE, "no new message")
        header = pop_header(outcome, request.invisible_ms)
        return req.response(ResponseCode.SUCCESS, None, header.to_ext(),
                            body_parts=[p.record for p in outcome.messages])

    def ack(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext(req.ext_fields)
        handle = _handle(h.extra_info, h.queue_id, h.offset)
        if isinstance(handle, str):
            return req.response(ResponseCode.MESSAGE_ILLEGAL, handle)
        refusal = self.operation.ack(AckRequest(h.consumer_group, h.topic, handle))
        return req.response() if refusal is None else req.response(refusal.code, refusal.reason)

    def change_invisible(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext(req.ext_fields)
        handle = _handle(h.extra_info, h.queue_id, h.offset)
        if isinstance(handle, str):
            return req.response(ResponseCode.MESSAGE_ILLEGAL, handle)
        new = self.operation.change_invisible(ChangeInvisibleRequest(h.consumer_group, h.topic, handle,
                                                                     h.invisible_time))
        if isinstance(new, Refusal):
            return req.response(new.code, new.reason)
        return req.response(ResponseCode.SUCCESS, None,
                            ChangeInvisibleTimeResponseHeader(new.pop_time, new.invisible_time,
                                                              new.revive_qid).to_ext())


def _handle(extra_info: str, queue_id: int, offset: int) -> ExtraInfo | str:
    """The header's handle, or what is wrong with it."""
    try:
        handle = ExtraInfo.parse(extra_info)
    except DecodeError as exc:
        return str(exc)
    if (handle.queue_id, handle.queue_offset) != (queue_id, offset):
        return (f"the header's queueId {queue_id} and offset {offset} are not the handle's "
                f"({handle.queue_id}, {handle.queue_offset})")
    return handle


def pop_header(outcome: PopOutcome, invisible_ms: int) -> PopMessageResponseHeader:
    """The response header of a pop: its time, what is left, and per queue the start and
    message offsets."""
    starts: dict[tuple[int, int], int] = {}
    offsets: dict[tuple[int, int], list[str]] = defaultdict(list)
    counts: dict[tuple[int, int], list[str]] = defaultdict(list)
    for p in outcome.messages:
        where = (p.handle.topic_type, p.queue_id)
        starts.setdefault(where, p.handle.ck_queue_offset)
        offsets[where].append(str(p.queue_offset))
        counts[where].append(f"{p.queue_offset}:{p.delivery_attempt - 1}")
    first = outcome.messages[0].handle
    return PopMessageResponseHeader(
        first.pop_time, invisible_ms, first.revive_qid, outcome.rest,
        offset_info([(k, q, str(v)) for (k, q), v in starts.items()]),
        offset_info([(k, q, ",".join(v)) for (k, q), v in offsets.items()]),
        offset_info([(k, q, ",".join(v)) for (k, q), v in counts.items()]) if outcome.orderly else None,
    )
