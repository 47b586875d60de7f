"""What producers and consumers trace, and when (RocketMQ's SendMessageTraceHookImpl and
ConsumeMessageTraceHookImpl).

- A send that got an answer is one Pub record: when it began, how long it took,
  the broker and queue, the store address, both ids, tags, keys, body length,
  the message type, and whether the status was SEND_OK. A batch gives a record
  per message (its own ids and queue offset, the batch's time shared out). A
  send that raised, and a oneway send, are not traced, as in RocketMQ.
- A listener call is a SubBefore record per message when it begins (reconsume
  times, client host) and a SubAfter per message when it ends (cost shared out
  over the batch, success, RocketMQ's return type). A lite pull consumer's
  `poll` counts as a successful consumption at once, as RocketMQ's does.

Messages of the trace topic itself, and messages whose TRACE_ON property is
``false``, are not traced. When tracing is off the hooks do nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.listener import is_async_listener
from skiff.client._impl.trace_dispatcher import TraceDispatcher
from skiff.client._impl.trace_format import (
    ConsumeReturnType,
    MessageType,
    PubTrace,
    SubAfterTrace,
    SubBeforeTrace,
)
from skiff.client.results import ConsumeOrderlyStatus, ConsumeStatus, SendResult, SendStatus
from skiff.client.trace import TraceSettings, TraceStats
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.message import Message
from skiff.common.msgid import UNIQ_IDS
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage

_DELAY_PROPS = frozenset({Prop.DELAY, Prop.DELIVER_TIME_MS, Prop.DELAY_MS, Prop.TIMER_DELIVER_MS,
                          Prop.TIMER_DELAY_SEC, Prop.TIMER_DELAY_MS})
_SUCCESS = (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)
MSG_REGION = "MSG_REGION"


class _Hook:
    """A dispatcher, or nothing when tracing is off."""

    def __init__(self, role: str, group: str, settings: TraceSettings | None, config: ClientConfig,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.group = group
        self.clock = clock
        self.dispatcher = None if settings is None else TraceDispatcher(settings, config, role, group)

    async def start(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.start()

    async def close(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.close()

    def stats(self) -> TraceStats | None:
        return None if self.dispatcher is None else self.dispatcher.stats()

    def _traced(self, topic: str) -> TraceDispatcher | None:
        d = self.dispatcher
        return None if d is None or topic == d.settings.topic else d


class SendTracer(_Hook):
    def __init__(self, group: str, settings: TraceSettings | None, config: ClientConfig,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__("PRODUCER", group, settings, config, clock)

    def timed(self, msg: Message, send: Coroutine[Any, Any, SendResult]) -> Coroutine[Any, Any, SendResult]:
        """``send``, to await, tracing its result (``send`` itself when tracing is off)."""
        if self.dispatcher is None:
            return send
        return self._timed(msg, send)

    async def _timed(self, msg: Message, send: Awaitable[SendResult]) -> SendResult:
        start_ms, t0 = self.clock.now_ms(), self.clock.monotonic()
        result = await send
        dispatcher = self._traced(msg.topic)
        if dispatcher is not None:
            cost_ms = int((self.clock.monotonic() - t0) * 1000)
            self._pub(dispatcher, msg, result, start_ms, cost_ms, result.msg_id, result.offset_msg_id, 0)
        return result

    async def timed_batch(self, msgs: Sequence[Message], sends: AsyncIterator[SendResult]) -> list[SendResult]:
        """Run a batch's sends (one per chunk, in order) and trace each message of each chunk."""
        start_ms, t0 = self.clock.now_ms(), self.clock.monotonic()
        results = [r async for r in sends]
        dispatcher = self._traced(msgs[0].topic) if msgs else None
        if dispatcher is None:
            return results
        cost_ms = int((self.clock.monotonic() - t0) * 1000 / len(msgs))
        traced = iter(msgs)
        for result in results:
            for i, (msg_id, offset_msg_id) in enumerate(zip(result.msg_ids, result.offset_msg_ids)):
                self._pub(dispatcher, next(traced), result, start_ms, cost_ms, msg_id, offset_msg_id, i)
        return results

    def _pub(self, dispatcher: TraceDispatcher, msg: Message, result: SendResult, start_ms: int, cost_ms: int,
             msg_id: str, offset_msg_id: str, index: int) -> None:
        if not result.trace_on:
            return  # the broker turned tracing off (its traceOn), as RocketMQ's hook obeys
        mq = result.message_queue
        instance = dispatcher.instance
        store_host = (instance.routes.master_addr(mq.broker_name) if instance is not None else None) or ""
        dispatcher.record(PubTrace(
            start_ms, result.region_id, self.group, msg.topic, msg_id, msg.properties.get(Prop.TAGS, ""),
            msg.properties.get(Prop.KEYS, ""), store_host, len(msg.body), cost_ms, _message_type(msg),
            offset_msg_id, result.send_status is SendStatus.SEND_OK, dispatcher.client_host, mq.broker_name,
            mq.queue_id, result.queue_offset + index,
        ))


def _message_type(msg: Message) -> MessageType:
    props = msg.properties
    if props.get(Prop.TRAN_MSG) == "true":
        return MessageType.TRANS_HALF
    return MessageType.NORMAL if _DELAY_PROPS.isdisjoint(props) else MessageType.DELAY


class ConsumeTracer(_Hook):
    def __init__(self, group: str, settings: TraceSettings | None, config: ClientConfig,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__("CONSUMER", group, settings, config, clock)

    def wrap(self, listener: Callable[..., Any]) -> Callable[..., Any]:
        """``listener`` with each call traced (the same listener when tracing is off)."""
        if self.dispatcher is None:
            return listener
        if is_async_listener(listener):
            async def traced_async(msgs: list[StoredMessage], ctx: Any) -> Any:
                began = self.before(msgs)
                try:
                    status = await listener(msgs, ctx)
                except Exception:
                    self.after(began, msgs, ConsumeReturnType.EXCEPTION)
                    raise
                self.after(began, msgs, _return_type(status))
                return status
            return traced_async

        def traced(msgs: list[StoredMessage], ctx: Any) -> Any:
            began = self.before(msgs)
            try:
                status = listener(msgs, ctx)
            except Exception:
                self.after(began, msgs, ConsumeReturnType.EXCEPTION)
                raise
            self.after(began, msgs, _return_type(status))
            return status
        return traced

    def polled(self, msgs: list[StoredMessage]) -> None:
        """A lite pull consumer handed ``msgs`` to its caller: consumed, successfully."""
        if msgs and self.dispatcher is not None:
            self.after(self.before(msgs), msgs, ConsumeReturnType.SUCCESS)

    def before(self, msgs: list[StoredMessage]) -> tuple[str, int, float, list[StoredMessage]]:
        """SubBefore records; returns what `after` needs."""
        request_id, start_ms = UNIQ_IDS.next_id(), self.clock.now_ms()
        traced = [m for m in msgs if self._traced(m.topic) is not None and m.properties.get(Prop.TRACE_ON) != "false"]
        d = self.dispatcher
        assert d is not None
        for m in traced:
            d.record(SubBeforeTrace(start_ms, m.properties.get(MSG_REGION, ""), self.group, request_id, m.msg_id,
                                    m.reconsume_times, m.properties.get(Prop.KEYS, ""), m.topic, d.client_host))
        return request_id, start_ms, self.clock.monotonic(), traced

    def after(self, began: tuple[str, int, float, list[StoredMessage]], msgs: list[StoredMessage],
              result: ConsumeReturnType) -> None:
        request_id, _, t0, traced = began
        d = self.dispatcher
        if d is None or not traced:
            return
        cost_ms = int((self.clock.monotonic() - t0) * 1000 / len(msgs))
        end_ms = self.clock.now_ms()
        for m in traced:
            d.record(SubAfterTrace(request_id, m.msg_id, cost_ms, result is ConsumeReturnType.SUCCESS,
                                   m.properties.get(Prop.KEYS, ""), int(result), end_ms, self.group))


def _return_type(status: object) -> ConsumeReturnType:
    if status in _SUCCESS:
        return ConsumeReturnType.SUCCESS
    return ConsumeReturnType.RETURNNULL if status is None else ConsumeReturnType.FAILED
