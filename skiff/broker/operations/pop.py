"""Pop, ack, change of invisible time and dead-lettering: POP consumption as one operation
for remoting's POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME and gRPC's
ReceiveMessage / AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue.

The checks are the gate's (`Gate.consumable` for a pop, `Gate.settleable` for what
settles a popped message), then this operation's own: the batch size (1 to 32) and a
positive invisible time (MESSAGE_ILLEGAL), the filter, a handle of this broker. The
work is `PopService`'s (skiff.broker.pop): cursors, in-flight messages, orderly
batches, redelivery, long polling.

Whether a pop is orderly follows RocketMQ: a remoting request says so itself (its
``order`` flag); a gRPC receive does not, and the proxy reads the group's
``consumeMessageOrderly`` instead (``orderly=None`` here). An orderly pop of every
queue (`ANY_QUEUE`) visits each readable queue and skips those blocked by an
un-acknowledged batch, as the broker's acting queue -1 does for the proxy.

A refusal of a pop that may not wait (too many wait, POLLING_FULL) or of a broker
shutting down meanwhile (SERVICE_NOT_AVAILABLE) comes back as a `Refusal` like any
other; a pop that found nothing is an outcome with no messages. An ack or change whose
handle names nothing in flight (acknowledged already, redelivered, or replaced by a
change of invisible time) is refused with NO_MESSAGE.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.broker.config import BrokerConfig
from skiff.broker.operations.gate import ANY_QUEUE, Gate
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.subscription import compile_subscription
from skiff.broker.pop.service import INIT_MAX, PopQuery, PopRefused, PopService, Popped, TierFetching
from skiff.common.limits import POP_MAX_MSG_NUMS
from skiff.protocol.codes import PopResponseCode, ResponseCode
from skiff.protocol.headers.pop import ExtraInfo

NOT_IN_FLIGHT = ("the message is not in flight: it was acknowledged already, redelivered after its "
                 "invisible time, or its handle was replaced by a change of invisible time")


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int | None
    """One queue, or `ANY_QUEUE`: every readable queue of the topic (and, not orderly, the
    group's retry topic for it)."""
    max_nums: int
    invisible_ms: int
    poll_ms: int = 0
    """How long a pop that finds nothing waits for something to pop."""
    expression: str = "*"
    expression_type: str | None = None
    orderly: bool | None = None
    """None: as the group's ``consumeMessageOrderly`` says (the 5.x proxy's rule)."""
    attempt_id: str = ""
    init_mode: int = INIT_MAX


@dataclass(frozen=True, slots=True)
class PopOutcome:
    messages: list[Popped]
    """Empty when nothing was found within the poll time."""
    orderly: bool
    rest: int
    """Messages of the topic past the group's cursors (remoting's restNum)."""


@dataclass(frozen=True, slots=True)
class AckRequest:
    """An ack, or a move to the dead-letter queue, of one popped message."""

    group: str
    topic: str
    handle: ExtraInfo


@dataclass(frozen=True, slots=True)
class ChangeInvisibleRequest:
    group: str
    topic: str
    handle: ExtraInfo
    invisible_ms: int
    """From now; 0 makes the message visible again at once."""


class PopOperation:
    def __init__(self, config: BrokerConfig, gate: Gate, service: PopService) -> None:
        self.config = config
        self.gate = gate
        self.service = service

    async def pop(self, req: PopRequest) -> PopOutcome | Refusal:
        """Pop now, or wait up to the request's poll time for something to pop."""
        query = self._query(req)
        if isinstance(query, Refusal):
            return query
        try:
            found = await self.service.pop(query, max(0, req.poll_ms))
        except PopRefused as refused:
            # SERVICE_NOT_AVAILABLE at shutdown, as a held pull's: clients back off before retrying.
            code = PopResponseCode.POLLING_FULL if refused.full else ResponseCode.SERVICE_NOT_AVAILABLE
            return Refusal(code, str(refused))
        rest = self.service.rest(req.group, req.topic) if found else 0
        return PopOutcome(found, query.orderly, rest)

    def _query(self, req: PopRequest) -> PopQuery | Refusal:
        group = self.gate.consumable(req.group, req.topic, req.queue_id)
        if isinstance(group, Refusal):
            return group
        if not 0 < req.max_nums <= POP_MAX_MSG_NUMS or req.invisible_ms <= 0:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"maxMsgNums must be 1 to {POP_MAX_MSG_NUMS} and "
                           f"invisibleTime positive: got {req.max_nums} and {req.invisible_ms}")
        flt = compile_subscription(req.expression or "*", req.expression_type, self.config.enable_property_filter)
        if isinstance(flt, Refusal):
            return flt
        orderly = group.consume_message_orderly if req.orderly is None else req.orderly
        queue_id = -1 if req.queue_id is ANY_QUEUE else req.queue_id
        return PopQuery(req.group, req.topic, queue_id, req.max_nums, req.invisible_ms, flt, orderly,
                        req.attempt_id, req.init_mode)

    def ack(self, req: AckRequest) -> Refusal | None:
        """Remove the message for good (None: done)."""
        refusal = self._settleable(req.group, req.topic, req.handle)
        if refusal is not None:
            return refusal
        if not self.service.ack(req.group, req.topic, req.handle):
            return Refusal(PopResponseCode.NO_MESSAGE, NOT_IN_FLIGHT)
        return None

    def change_invisible(self, req: ChangeInvisibleRequest) -> ExtraInfo | Refusal:
        """The message's new handle, hidden for the request's time from now."""
        refusal = self._settleable(req.group, req.topic, req.handle)
        if refusal is not None:
            return refusal
        if req.invisible_ms < 0:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"invisibleTime {req.invisible_ms} is negative")
        new = self.service.change_invisible(req.group, req.topic, req.handle, req.invisible_ms)
        return Refusal(PopResponseCode.NO_MESSAGE, NOT_IN_FLIGHT) if new is None else new

    async def dead_letter(self, req: AckRequest) -> Refusal | None:
        """Move the message to ``%DLQ%<group>`` now and acknowledge it (None: done); a message
        only the tier holds waits, a bounded time, for the tier's fetch."""
        refusal = self._settleable(req.group, req.topic, req.handle)
        if refusal is not None:
            return refusal
        try:
            if not await self.service.dead_letter(req.group, req.topic, req.handle):
                return Refusal(PopResponseCode.NO_MESSAGE, NOT_IN_FLIGHT)
        except TierFetching as exc:  # busy, not a bad handle: the client forwards it again later
            return Refusal(ResponseCode.SYSTEM_BUSY, str(exc))
        return None

    def _settleable(self, group: str, topic: str, handle: ExtraInfo) -> Refusal | None:
        real_topic = self.service.real_key(group, topic, handle)[1]
        checked = self.gate.settleable(group, real_topic, handle.queue_id)
        if isinstance(checked, Refusal):
            return checked
        if handle.broker_name != self.config.broker_name:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, f"the handle is from broker {handle.broker_name}, "
                                                         f"not {self.config.broker_name}", bad_request=True)
        return None
