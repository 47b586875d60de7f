"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053):
RocketMQ 5.x's POP consumption over remoting; the work is `skiff.broker.pop.PopService`.

Checks and codes: the gate's consumption checks (`skiff.broker.operations.gate`: the
group, the broker's and the topic's read permission, the topic, the queue id), then
``maxMsgNums`` (1 to 32) and ``invisibleTime`` (MESSAGE_ILLEGAL), the filter (as a
pull's). A pop that finds nothing answers POLLING_TIMEOUT after waiting ``pollTime``
ms, or NO_MESSAGE at once without one; POLLING_FULL when ``maxPopPollingSize`` pops
wait already, SERVICE_NOT_AVAILABLE when the broker shuts down meanwhile. Found: SUCCESS, the records back to back in
the body (the retry topic's copies keep that topic; ``RETRY_TOPIC`` names the
original) and the offset infos the client builds handles from
(`skiff.protocol.headers.pop`). An ack or change whose handle names nothing in
flight (acknowledged, redelivered, or given a new handle) gets NO_MESSAGE.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable

from skiff.broker.config import BrokerConfig
from skiff.broker.operations import ANY_QUEUE, Gate, Refusal, compile_subscription
from skiff.broker.pop.service import PopRefused, PopRequest, PopService, Popped
from skiff.common.limits import POP_MAX_MSG_NUMS
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

_NOT_IN_FLIGHT = ("the message is not in flight: it was acknowledged already, redelivered after its "
                  "invisible time, or its handle was replaced by a change of invisible time")


class PopProcessor:
    def __init__(self, config: BrokerConfig, gate: Gate, pop: PopService) -> None:
        self.config = config
        self.gate = gate
        self.service = pop

    def handlers(self) -> dict[int, Handler]:
        return {PopRequestCode.POP_MESSAGE: self.pop, PopRequestCode.ACK_MESSAGE: self.ack,
                PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible}

    def pop(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = PopMessageRequestHeader.from_ext(req.ext_fields)
        refused = self.gate.consumable(h.consumer_group, h.topic, ANY_QUEUE if h.queue_id == -1 else h.queue_id)
        if isinstance(refused, Refusal):
            return req.response(refused.code, refused.reason)
        if not 0 < h.max_msg_nums <= POP_MAX_MSG_NUMS or h.invisible_time <= 0:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, f"maxMsgNums must be 1 to {POP_MAX_MSG_NUMS} and "
                                f"invisibleTime positive: got {h.max_msg_nums} and {h.invisible_time}")
        flt = compile_subscription(h.exp or "*", h.exp_type, self.config.enable_property_filter)
        if isinstance(flt, Refusal):
            return req.response(flt.code, flt.reason)
        request = PopRequest(h.consumer_group, h.topic, h.queue_id, h.max_msg_nums, h.invisible_time, flt,
                             bool(h.order), h.attempt_id or "", h.init_mode)
        return self._answer(req, request, max(0, h.poll_time))

    async def _answer(self, req: RemotingCommand, request: PopRequest, poll_ms: int) -> RemotingCommand:
        try:
            found = await self.service.pop(request, poll_ms)
        except PopRefused as refused:
            # SERVICE_NOT_AVAILABLE at shutdown, as a held pull's: clients back off before retrying.
            return req.response(PopResponseCode.POLLING_FULL if refused.full else ResponseCode.SERVICE_NOT_AVAILABLE,
                                str(refused))
        if not found:
            if poll_ms:
                return req.response(PopResponseCode.POLLING_TIMEOUT, "no new message within the poll time")
            return req.response(PopResponseCode.NO_MESSAGE, "no new message")
        header = pop_header(found, request, self.service.rest(request.group, request.topic))
        return req.response(ResponseCode.SUCCESS, None, header.to_ext(), body_parts=[p.record for p in found])

    def ack(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = AckMessageRequestHeader.from_ext(req.ext_fields)
        handle = self._handle(h.extra_info, h.queue_id, h.offset)
        if isinstance(handle, str):
            return req.response(ResponseCode.MESSAGE_ILLEGAL, handle)
        if not self.service.ack(h.consumer_group, h.topic, handle):
            return req.response(PopResponseCode.NO_MESSAGE, _NOT_IN_FLIGHT)
        return req.response()

    def change_invisible(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = ChangeInvisibleTimeRequestHeader.from_ext(req.ext_fields)
        handle = self._handle(h.extra_info, h.queue_id, h.offset)
        if isinstance(handle, str) or h.invisible_time < 0:
            return req.response(ResponseCode.MESSAGE_ILLEGAL, handle if isinstance(handle, str)
                                else f"invisibleTime {h.invisible_time} is negative")
        new = self.service.change_invisible(h.consumer_group, h.topic, handle, h.invisible_time)
        if new is None:
            return req.response(PopResponseCode.NO_MESSAGE, _NOT_IN_FLIGHT)
        return req.response(ResponseCode.SUCCESS, None,
                            ChangeInvisibleTimeResponseHeader(new.pop_time, new.invisible_time,
                                                              new.revive_qid).to_ext())

    def _handle(self, extra_info: str, queue_id: int, offset: int) -> ExtraInfo | str:
        handle = ExtraInfo.parse(extra_info)
        if (handle.queue_id, handle.queue_offset) != (queue_id, offset):
            return (f"the header's queueId {queue_id} and offset {offset} are not the handle's "
                    f"({handle.queue_id}, {handle.queue_offset})")
        if handle.broker_name != self.config.broker_name:
            return f"the handle is from broker {handle.broker_name}, not {self.config.broker_name}"
        return handle


def pop_header(found: list[Popped], request: PopRequest, rest: int) -> PopMessageResponseHeader:
    """The response header of a pop: its time, what is left, and per queue the start and
    message offsets."""
    starts: dict[tuple[int, int], int] = {}
    offsets: dict[tuple[int, int], list[str]] = defaultdict(list)
    counts: dict[tuple[int, int], list[str]] = defaultdict(list)
    for p in found:
        where = (p.handle.topic_type, p.queue_id)
        starts.setdefault(where, p.handle.ck_queue_offset)
        offsets[where].append(str(p.queue_offset))
        counts[where].append(f"{p.queue_offset}:{p.delivery_attempt - 1}")
    first = found[0].handle
    return PopMessageResponseHeader(
        first.pop_time, request.invisible_ms, first.revive_qid, rest,
        offset_info([(k, q, str(v)) for (k, q), v in starts.items()]),
        offset_info([(k, q, ",".join(v)) for (k, q), v in offsets.items()]),
        offset_info([(k, q, ",".join(v)) for (k, q), v in counts.items()]) if request.orderly else None,
    )
