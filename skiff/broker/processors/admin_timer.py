"""The timer's requests: GET_TIMER_SLOTS (10001), CANCEL_SCHEDULED_MESSAGE (10002) and
RocketMQ's GET_ALL_DELAY_OFFSET (45): the remoting door's adapter over the timer's
operations (`skiff.broker.operations.timer`), which ask the broker's `TimerService`
(docs/timer.md). RocketMQ has neither of the first two requests, hence codes from
`SkiffRequestCode`. A cancel is an expected outcome
whatever it finds (CANCELLED, ALREADY_DELIVERED, ALREADY_CANCELLED, NOT_FOUND),
so it is answered SUCCESS with the outcome in the body; only a request without
an id, or a cancel that could not be made durable, is an error. A cancel
fsyncs, so it runs on a thread rather than the event loop.

GET_ALL_DELAY_OFFSET is what a RocketMQ slave asks its master for and writes to its
delayOffset.json: ``{"offsetTable": {level: offset}}``, per delay level the offset in
SCHEDULE_TOPIC_XXXX's queue level - 1 below which everything is delivered
(`TimerService.delay_offsets`). A broker not running the timer (a slave) answers
SYSTEM_ERROR "No delay offset in this broker", as RocketMQ's does with an empty table.
"""

from __future__ import annotations

from skiff.broker.operations import Refusal
from skiff.broker.operations.timer import CancelOperation, TimerState, TimerStateOperation
from skiff.broker.processors.answers import answer
from skiff.protocol.bodies.timer import (
    CancelOutcomeBody,
    CancelScheduledBody,
    CancelStatus,
    DelayOffsetBody,
    TimerSlot,
    TimerSlotsBody,
    TimerStatsBody,
)
from skiff.protocol.codes import RequestCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.timer import CancelScheduledMessageRequestHeader
from skiff.store.timer import CancelResult
from skiff.transport.connection import Connection, Handler


class TimerAdminProcessor:
    def __init__(self, timer: TimerStateOperation, canceller: CancelOperation) -> None:
        self.timer = timer
        self.canceller = canceller

    def handlers(self) -> dict[int, Handler]:
        return {
            SkiffRequestCode.GET_TIMER_SLOTS: self.slots,
            SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE: self.cancel,
            RequestCode.GET_ALL_DELAY_OFFSET: self.delay_offsets,
        }

    def delay_offsets(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        table = self.timer.delay_offsets()
        return answer(req, table if isinstance(table, Refusal) else DelayOffsetBody(table))

    def slots(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        state = self.timer.state()
        return answer(req, state if isinstance(state, Refusal) else slots_body(state))

    async def cancel(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        msg_id = CancelScheduledMessageRequestHeader.from_ext(req.ext_fields).msg_id
        result = await self.canceller.cancel(msg_id)
        return answer(req, result if isinstance(result, Refusal) else cancel_body(result))


def slots_body(state: TimerState) -> TimerSlotsBody:
    stats = state.stats
    return TimerSlotsBody(
        state.slot_ms, state.precision_ms,
        tuple(TimerSlot(s.slot_start_ms, s.scheduled, s.loaded) for s in state.slots),
        TimerStatsBody(stats.scheduled, stats.in_wheel, stats.delivered, stats.cancelled, stats.dropped,
                       stats.unroutable, stats.replay_lag, stats.slots_on_disk, stats.slots_loaded,
                       stats.lateness_p50_ms, stats.lateness_p99_ms, stats.lateness_max_ms),
    )


def cancel_body(result: CancelResult) -> CancelScheduledBody:
    outcomes = tuple(CancelOutcomeBody(o.timer_id, o.slot_start_ms, o.due_ms, CancelStatus(o.status.name))
                     for o in result.outcomes)
    return CancelScheduledBody(result.msg_id, CancelStatus(result.status.name), outcomes)

