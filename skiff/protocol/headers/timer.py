"""Skiff's timer admin requests (`SkiffRequestCode`, 10000 up; RocketMQ has no such requests).

GET_TIMER_SLOTS (10001) has no header; its answer's body is a
`skiff.protocol.bodies.timer.TimerSlotsBody`. CANCEL_SCHEDULED_MESSAGE (10002)
names the message by ``msgId``: its UNIQ_KEY (every parked copy: its retries
share it) or the offsetMsgId its send returned (the record parked in
SCHEDULE_TOPIC_XXXX); the answer's body is a `CancelScheduledBody`.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header


@dataclass(frozen=True, slots=True)
class CancelScheduledMessageRequestHeader(Header):
    msg_id: str
