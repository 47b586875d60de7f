"""Cancelling scheduled messages by id (neither RocketMQ nor QMQ can).

An id is a UNIQ_KEY (every parked copy of the message: its retries share it)
or an offsetMsgId of a parked record in SCHEDULE_TOPIC_XXXX. The parked
records are looked up in the CommitLog (the index for a UNIQ_KEY); once
retention has removed them (messages due after fileReservedTime), the schedule
logs are searched instead, which reads them whole.

A cancel is a CANCELLED record in the slot's dispatch log, fsynced before the
call returns (after the CommitLog, so it never names a record a crash could
lose): a loaded slot drops the row from the wheel, a slot loaded later skips
it, and a message the replay has not reached yet is skipped when it arrives. A
message already taken for delivery is ALREADY_DELIVERED: nothing is undone.
"""

from __future__ import annotations

from skiff.common.errors import DecodeError
from skiff.common.msgid import decode_offset_msg_id
from skiff.common.names import SCHEDULE_TOPIC
from skiff.common.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, Prop
from skiff.common.record import pack_host, read_head, read_tail
from skiff.store.message_store import MessageStore
from skiff.store.timer.dispatch_log import DispatchLogs
from skiff.store.timer.formats import Outcome
from skiff.store.timer.parked import Parked, parse_parked
from skiff.store.timer.results import CancelOutcome, CancelResult, CancelStatus
from skiff.store.timer.schedule_log import ScheduleLogs
from skiff.store.timer.slots import SlotKeeper, TimerState

_ANY_TIME_MS = 2**62


class Canceller:
    def __init__(self, store: MessageStore, state: TimerState, logs: ScheduleLogs, dispatch: DispatchLogs,
                 keeper: SlotKeeper) -> None:
        self.store = store
        self.state = state
        self.logs = logs
        self.dispatch = dispatch
        self.keeper = keeper
        self.cancelled = 0

    def cancel(self, msg_id: str) -> CancelResult:
        """Cancel every parked message ``msg_id`` names. Raises OSError when the cancel cannot
        be made durable (nothing is cancelled then)."""
        phys = self._own_offset(msg_id)
        parked = self._parked_in_commitlog(msg_id, phys) or self._parked_in_schedule_logs(msg_id, phys)
        targets = [p for p in parked if p.timer_id == phys or p.uniq_key == msg_id]
        if targets:
            self.store.flush()
        return CancelResult(msg_id, tuple(self._cancel(p) for p in sorted(set(targets))))

    def _own_offset(self, msg_id: str) -> int | None:
        """The CommitLog offset ``msg_id`` names when it is an offsetMsgId of this store."""
        try:
            decoded = decode_offset_msg_id(msg_id)
        except (DecodeError, ValueError):
            return None
        return decoded.physical_offset if pack_host(decoded.host, decoded.port) == self.store.store_host else None

    def _parked_in_commitlog(self, msg_id: str, phys: int | None) -> list[Parked]:
        records = self.store.query_by_key(SCHEDULE_TOPIC, msg_id, self.store.config.max_msgs_num_batch, 0, _ANY_TIME_MS)
        own = None if phys is None else self.store.read_record(phys)
        if own is not None and read_tail(own, 0, read_head(own)).topic == SCHEDULE_TOPIC:
            records.append(own)
        return _parse_all(records)

    def _parked_in_schedule_logs(self, msg_id: str, phys: int | None) -> list[Parked]:
        needle = f"{Prop.UNIQ_KEY}{NAME_VALUE_SEPARATOR}{msg_id}{PROPERTY_SEPARATOR}".encode()
        records: list[bytes] = []
        for f in list(self.logs.logs.values()):
            try:
                records += f.matching(needle, phys)
            except OSError:
                continue  # retired and unlinked meanwhile: everything in it was delivered
        return _parse_all(records)

    def _cancel(self, p: Parked) -> CancelOutcome:
        slot_ms = self.keeper.slot_of(p.due_ms)
        state = self.state
        with state.lock:
            status = self._decide(p, slot_ms)
            if status is CancelStatus.CANCELLED:
                self.dispatch.append(slot_ms, Outcome.CANCELLED, [p.timer_id])
                self._apply(p, slot_ms)
                self.cancelled += 1
        return CancelOutcome(p.timer_id, slot_ms, p.due_ms, status)

    def _decide(self, p: Parked, slot_ms: int) -> CancelStatus:
        """What a cancel of ``p`` would do (state lock held)."""
        state = self.state
        replayed = p.queue_offset < state.progress.get(p.queue_id, 0)
        loaded = state.loaded.get(slot_ms)
        if loaded is not None:
            if p.timer_id in loaded.cancelled:
                return CancelStatus.ALREADY_CANCELLED
            if p.timer_id in loaded.finished_before or (replayed and not state.wheel.contains(p.due_ms, p.timer_id)):
                return CancelStatus.ALREADY_DELIVERED
            return CancelStatus.CANCELLED
        if replayed and slot_ms not in self.logs.logs:
            return CancelStatus.ALREADY_DELIVERED  # the slot was finished and retired
        if p.timer_id in state.cancels.get(slot_ms, ()):
            return CancelStatus.ALREADY_CANCELLED
        before = self.dispatch.read(slot_ms).get(p.timer_id)
        if before is None:
            return CancelStatus.CANCELLED
        return CancelStatus.ALREADY_CANCELLED if before is Outcome.CANCELLED else CancelStatus.ALREADY_DELIVERED

    def _apply(self, p: Parked, slot_ms: int) -> None:
        state = self.state
        loaded = state.loaded.get(slot_ms)
        if loaded is None:
            state.cancels.setdefault(slot_ms, set()).add(p.timer_id)
            return
        loaded.cancelled.add(p.timer_id)
        if state.wheel.remove(p.due_ms, p.timer_id):
            loaded.outstanding -= 1


def _parse_all(records: list[bytes]) -> list[Parked]:
    parsed = (parse_parked(r) for r in records)
    return [p for p in parsed if isinstance(p, Parked)]
