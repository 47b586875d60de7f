"""The timer's requests: GET_TIMER_SLOTS (10001), CANCEL_SCHEDULED_MESSAGE (10002) and
RocketMQ's GET_ALL_DELAY_OFFSET (45).

Both go to the broker's `TimerService` (docs/timer.md). RocketMQ has neither
request, hence codes from `SkiffRequestCode`. A cancel is an expected outcome
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

from collections.abc import Callable, Sequence

from skiff.broker.operations import Refusal
from skiff.broker.operations.timer import NOT_RUNNING, CancelOperation
from skiff.protocol.bodies.timer import (
    CancelOutcomeBody,
    CancelScheduledBody,
    CancelStatus,
    DelayOffsetBody,
    TimerSlot,
    TimerSlotsBody,
    TimerStatsBody,
)
from skiff.protocol.codes import RequestCode, ResponseCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.timer import CancelScheduledMessageRequestHeader
from skiff.store import StoreConfig
from skiff.store.timer import CancelResult, TimerService
from skiff.transport.connection import Connection, Handler


class TimerAdminProcessor:
    def __init__(self, store_config: StoreConfig, timer: Callable[[], TimerService | None],
                 delay_levels_ms: Sequence[int], canceller: CancelOperation) -> None:
        """``timer()`` is the broker's running timer (None while it is not running);
        ``delay_levels_ms`` the delay of each level (messageDelayLevel)."""
        self.store_config = store_config
        self._timer = timer
        self.canceller = canceller
        self.delay_levels_ms = tuple(delay_levels_ms)

    def handlers(self) -> dict[int, Handler]:
        return {
            SkiffRequestCode.GET_TIMER_SLOTS: self.slots,
            SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE: self.cancel,
            RequestCode.GET_ALL_DELAY_OFFSET: self.delay_offsets,
        }

    def delay_offsets(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        timer = self._timer()
        if timer is None:
            return req.response(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return req.response(body=DelayOffsetBody(timer.delay_offsets(self.delay_levels_ms)).to_json())

    def slots(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        timer = self._timer()
        if timer is None:
            return _not_running(req)
        stats = timer.stats()
        body = TimerSlotsBody(
            self.store_config.timer_slot_ms, self.store_config.timer_precision_ms,
            tuple(TimerSlot(s.slot_start_ms, s.scheduled, s.loaded) for s in timer.scheduled_per_slot()),
            TimerStatsBody(stats.scheduled, stats.in_wheel, stats.delivered, stats.cancelled, stats.dropped,
                           stats.unroutable, stats.replay_lag, stats.slots_on_disk, stats.slots_loaded,
                           stats.lateness_p50_ms, stats.lateness_p99_ms, stats.lateness_max_ms),
        )
        return req.response(body=body.to_json())

    async def cancel(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        msg_id = CancelScheduledMessageRequestHeader.from_ext(req.ext_fields).msg_id
        result = await self.canceller.cancel(msg_id)
        if isinstance(result, Refusal):
            return req.response(result.code, result.reason)
        return req.response(body=cancel_body(result).to_json())


def cancel_body(result: CancelResult) -> CancelScheduledBody:
    outcomes = tuple(CancelOutcomeBody(o.timer_id, o.slot_start_ms, o.due_ms, CancelStatus(o.status.name))
                     for o in result.outcomes)
    return CancelScheduledBody(result.msg_id, CancelStatus(result.status.name), outcomes)


def _not_running(req: RemotingCommand) -> RemotingCommand:
    return req.response(NOT_RUNNING.code, NOT_RUNNING.reason)
