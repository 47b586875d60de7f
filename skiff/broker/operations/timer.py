"""The timer's operations: cancel of a scheduled message (remoting CANCEL_SCHEDULED_MESSAGE,
gRPC RecallMessage), its state (GET_TIMER_SLOTS: `skiff timer slots`, the dashboard) and
RocketMQ's delay offset table (GET_ALL_DELAY_OFFSET, which a RocketMQ slave asks its master for).

Only a master runs the timer, so a broker without one refuses; the cancel is made
durable in a thread (it writes the timer's logs) and refused, with nothing cancelled,
when it cannot be.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skiff.broker.operations.refusal import Refusal
from skiff.protocol.codes import ResponseCode
from skiff.store.timer import CancelResult, SlotCount, TimerService, TimerStats

log = logging.getLogger(__name__)


class CancelOperation:
    def __init__(self, timer: Callable[[], TimerService | None]) -> None:
        """``timer()``: the broker's running timer, None while it runs none."""
        self._timer = timer

    async def cancel(self, msg_id: str) -> CancelResult | Refusal:
        msg_id = msg_id.strip().upper()
        timer = self._timer()
        if timer is None:
            return NOT_RUNNING
        if not msg_id:
            return Refusal(ResponseCode.SYSTEM_ERROR, "give the id of the message to cancel (msgId)")
        try:
            return await asyncio.to_thread(timer.cancel, msg_id)
        except OSError as exc:
            log.error("cancelling %s failed: %s", msg_id, exc)
            return Refusal(ResponseCode.SYSTEM_ERROR, f"the cancel of {msg_id} could not be made durable ({exc}); "
                                                      f"nothing was cancelled")


NOT_RUNNING = Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, "the broker's timer is not running")
NO_DELAY_OFFSETS = Refusal(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
"""RocketMQ's answer to GET_ALL_DELAY_OFFSET from a broker without delay offsets (a slave)."""


@dataclass(frozen=True, slots=True)
class TimerState:
    slot_ms: int
    precision_ms: int
    slots: list[SlotCount]
    """Messages not yet delivered or cancelled per slot on disk, earliest first."""
    stats: TimerStats


class TimerStateOperation:
    def __init__(self, timer: Callable[[], TimerService | None], slot_ms: int, precision_ms: int,
                 delay_levels_ms: Sequence[int]) -> None:
        """``timer()``: the broker's running timer, None while it runs none; ``slot_ms`` and
        ``precision_ms``: timerSlotMs and timerPrecisionMs; ``delay_levels_ms``: the delay of
        each level (messageDelayLevel)."""
        self._timer = timer
        self.slot_ms = slot_ms
        self.precision_ms = precision_ms
        self.delay_levels_ms = tuple(delay_levels_ms)

    def state(self) -> TimerState | Refusal:
        timer = self._timer()
        if timer is None:
            return NOT_RUNNING
        return TimerState(self.slot_ms, self.precision_ms, timer.scheduled_per_slot(), timer.stats())

    def delay_offsets(self) -> dict[int, int] | Refusal:
        """Per delay level, the offset in SCHEDULE_TOPIC_XXXX's queue level - 1 below which
        everything is delivered (`TimerService.delay_offsets`)."""
        timer = self._timer()
        if timer is None:
            return NO_DELAY_OFFSETS
        return timer.delay_offsets(self.delay_levels_ms)
