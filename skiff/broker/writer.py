"""MessageWriter: turns what a producer (or the broker itself) sends into store inputs.

It is the one place that decides where a message is really stored (delayed and
half messages are parked, see `skiff.broker.redirect`) and that fills in what
the store indexes (tags, keys, unique id). The send and send-back processors
both write through it.

It also drops ``TIMER_ID`` from what clients send: the timer marks its
deliveries with it, and after a restart it reads the CommitLog's tail for those
marks to learn what it already delivered. A forged or forwarded mark (a consumer
re-sending a delivered timed message as it got it) would make it skip a
scheduled message: a loss.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import repeat

from skiff.broker.redirect import REDIRECT_PROPERTIES, DelayPolicy, Redirected, is_half, park_delayed, park_half
from skiff.common import kernels
from skiff.common.clock import Clock
from skiff.common.properties import Prop, decode_properties, encode_properties
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.message_codec import BatchColumns, property_columns
from skiff.store import MessageInput

_PREPARED_OR_ROLLBACK = int(MessageSysFlag.TRANSACTION_PREPARED)
"""The bit set by both the prepared (0x4) and the rolled-back (0xC) transaction types."""
_INDEXED = (Prop.TAGS, Prop.KEYS, Prop.UNIQ_KEY)
"""The properties the store indexes, in `MessageInput`'s order."""
_NOT_AS_SENT = REDIRECT_PROPERTIES | {Prop.TIMER_ID}
"""Properties that keep a batch's messages from being stored exactly as sent."""


def without_timer_id(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` less ``TIMER_ID``, which only the timer may set (see the module docstring)."""
    return {name: value for name, value in props.items() if name != Prop.TIMER_ID}


class MessageWriter:
    def __init__(self, delay: DelayPolicy, clock: Clock, *, reject_transactions: bool = False) -> None:
        self.delay = delay
        self.clock = clock
        self.reject_transactions = reject_transactions

    def message(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        props: Mapping[str, str],
        raw_props: bytes | None,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        reconsume_times: int = 0,
    ) -> MessageInput | str:
        """The store input for one message, or why it is refused.

        ``raw_props`` are ``props`` already encoded (a single send carries them
        that way), or None to encode them here.
        """
        if Prop.TIMER_ID in props:
            props = without_timer_id(props)
            raw_props = None
        if not REDIRECT_PROPERTIES.isdisjoint(props):
            redirected = self._redirect(topic, queue_id, props, sys_flag)
            if isinstance(redirected, str):
                return redirected
            if redirected is not None:
                topic, queue_id, props, sys_flag = redirected
                raw_props = None
        # Positional: one per message sent, and 13 keywords would add ~0.4 µs to it; the field
        # order is checked at import (skiff.common.kernels.ROW_LAYOUTS).
        return MessageInput(
            topic, queue_id, body, encode_properties(props) if raw_props is None else raw_props, flag, sys_flag,
            born_timestamp, born_host, reconsume_times, 0, props.get(Prop.TAGS), props.get(Prop.KEYS),
            props.get(Prop.UNIQ_KEY),
        )

    def batch(
        self,
        topic: str,
        queue_id: int,
        records: BatchColumns,
        sys_flag: int,
        born_timestamp: int,
        born_host: bytes,
        reconsume_times: int = 0,
    ) -> list[MessageInput] | str:
        """The store inputs of a batch's messages, or why the batch is refused. A batch is
        stored as sent (RocketMQ's rule): none of its messages may be delayed or half."""
        flags, bodies, raw = records
        head = (topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times)
        inputs = batch_inputs(MessageInput, head, flags, bodies, raw, _INDEXED, _NOT_AS_SENT)
        if inputs is not None:
            return inputs
        props = list(map(decode_properties, raw))
        refused = next((p for p in props if not REDIRECT_PROPERTIES.isdisjoint(p)), None)
        if refused is not None:
            return batch_refusal(refused)
        # a TIMER_ID made it decline: only the messages holding one are re-encoded without it
        stripped = [encode_properties(without_timer_id(p)) if Prop.TIMER_ID in p else r for p, r in zip(props, raw)]
        return _rows(MessageInput, head, flags, bodies, stripped, [[p.get(name) for p in props] for name in _INDEXED])

    def _redirect(self, topic: str, queue_id: int, props: Mapping[str, str], sys_flag: int) -> Redirected | str | None:
        if is_half(props):
            if self.reject_transactions:
                return "this broker refuses transactional messages (rejectTransactionMessage=true)"
            return park_half(props, topic, queue_id, sys_flag)
        if sys_flag & _PREPARED_OR_ROLLBACK:
            return None
        when = self.delay.schedule(props, self.clock.now_ms())
        if when is None or isinstance(when, str):
            return when
        return park_delayed(props, topic, queue_id, sys_flag, when)


def batch_inputs_py(cls: type[MessageInput], head: tuple[str, int, int, int, bytes, int], flags: Sequence[int],
                    bodies: Sequence[bytes], properties: Sequence[bytes], indexed: Sequence[str],
                    refused: Collection[str]) -> list[MessageInput] | None:
    """One ``cls`` row per message of a split batch: ``head`` (topic, queue id, sysFlag, born
    time, born host, reconsume times), its flag, body and properties, no prepared-transaction
    offset, then its ``indexed`` properties' values as `decode_properties` reads them; None
    when a message has a ``refused`` property (the caller then looks message by message).

    A batch whose messages share their property names (what producers send) is read as
    columns (`property_columns`), without a Python step per message or pair."""
    refused = frozenset(refused)
    columns = property_columns(properties) if properties else None
    fields: list[Sequence[str | None]]
    if columns is not None:
        if not refused.isdisjoint(columns.names):
            return None
        fields = [columns.values(name) for name in indexed]
    else:
        props = list(map(decode_properties, properties))
        if any(not refused.isdisjoint(p) for p in props):
            return None
        fields = [[p.get(name) for p in props] for name in indexed]
    return _rows(cls, head, flags, bodies, properties, fields)


def _rows(cls: type[MessageInput], head: tuple[str, int, int, int, bytes, int], flags: Sequence[int],
          bodies: Sequence[bytes], properties: Sequence[bytes],
          fields: Sequence[Sequence[str | None]]) -> list[MessageInput]:
    topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times = head
    n = min(len(flags), len(bodies), len(properties))
    # Rows made by slot, as the compiled batch_inputs makes them (no keywords, no __new__
    # call per message); the field order is checked at import (skiff.common.kernels.ROW_LAYOUTS).
    return list(map(tuple.__new__, repeat(cls), zip(
        repeat(topic, n), repeat(queue_id), bodies, properties, flags, repeat(sys_flag), repeat(born_timestamp),
        repeat(born_host), repeat(reconsume_times), repeat(0), *fields)))


batch_inputs = kernels.select("batch_inputs", batch_inputs_py, "skiff.broker._kernels")


def batch_refusal(props: Mapping[str, str]) -> str:
    """Why a batch holding a message with these (delay or transaction) properties is refused."""
    if is_half(props):
        return "a batch cannot hold transactional messages"
    return "a batch cannot hold delayed messages (it has a DELAY or delivery time property)"
