"""Cancel of a scheduled message (remoting CANCEL_SCHEDULED_MESSAGE, gRPC RecallMessage).

Only a master runs the timer, so a broker without one refuses; the cancel is made
durable in a thread (it writes the timer's logs) and refused, with nothing cancelled,
when it cannot be.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from skiff.broker.operations.refusal import Refusal
from skiff.protocol.codes import ResponseCode
from skiff.store.timer import CancelResult, TimerService

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
