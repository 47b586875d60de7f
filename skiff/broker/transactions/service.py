"""TransactionService: ends transactions (END_TRANSACTION), asks producers about the ones
left open (CHECK_TRANSACTION_STATE), and keeps its progress through the half and op queues.

Everything runs on the broker's event loop, so the table needs no lock: an
END_TRANSACTION and a check round never interleave inside one step. Before
acting, the service reads whatever the two queues gained since it last looked
(`catch_up`), so its table always covers every half message stored.

Check rounds (every ``transactionCheckInterval``): each open transaction older
than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``, whichever
is longer; measured from the broker's store time) is handled once per round:

- checked ``transactionCheckMax`` times already → put to TRANS_CHECK_MAX_TIME_TOPIC,
  closed with an op record, logged;
- a producer of its group is connected → its half message is re-put with the count
  + 1 and CHECK_TRANSACTION_STATE goes oneway to one producer (round robin);
- no producer is connected → re-put with the same count (not a check): it waits for
  the next round, and the half offset can still move past it.

Progress is committed every ``flushConsumerOffsetInterval`` and at shutdown, after
an fsync of the CommitLog when the service's own records are not durable yet, so
a persisted offset never runs ahead of the records that justify it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Iterator

from skiff.broker.clients import ClientChannel, ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.topics import READ_WRITE, TopicConfigManager
from skiff.broker.transactions.half import (
    HalfRecord,
    check_command,
    commit_input,
    copy_input,
    discard_input,
    op_input,
    parse_half,
    parse_op,
)
from skiff.broker.transactions.results import CheckReport, EndResult, EndStatus, Outcome, TransactionRecovery
from skiff.broker.transactions.table import OpenTransaction, TransactionTable
from skiff.broker.writer import MessageWriter
from skiff.common.clock import Clock
from skiff.common.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_GROUP, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from skiff.common.record import read_head
from skiff.common.service import Periodic
from skiff.common.sysflag import MessageSysFlag
from skiff.protocol.errors import ConnectionClosed
from skiff.protocol.headers.transaction import EndTransactionRequestHeader
from skiff.store import GetStatus, MessageInput, MessageStore, PutResult
from skiff.store.timer.replay import records_of

log = logging.getLogger(__name__)

COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)
UNKNOWN = 0
READ_BATCH = 1024
"""ConsumeQueue entries read per store call while catching up."""
CHECKS_PER_STEP = 256
"""Due transactions handled before a check round lets the loop serve other requests."""
_SKIP_STATUSES = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING,
                            GetStatus.NO_MATCHED_MESSAGE})


def read_queue(store: MessageStore, topic: str, offset: int) -> Iterator[tuple[int, memoryview]]:
    """(queue offset, record) of queue 0 of ``topic`` from ``offset`` to its end. Entries
    retention removed are passed over (and logged): nothing can bring them back."""
    while offset < store.get_max_offset(topic, 0):
        got = store.get_messages(topic, 0, offset, READ_BATCH)
        if got.found:
            for record in records_of(got):
                yield read_head(record).queue_offset, record
        elif got.status in _SKIP_STATUSES and got.next_begin_offset > offset:
            log.error("%s entries %d..%d are gone (retention) before the transaction service read them",
                      topic, offset, got.next_begin_offset - 1)
        else:
            return
        offset = got.next_begin_offset


class TransactionService:
    def __init__(self, config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 clients: ClientManager, offsets: ConsumerOffsetManager, writer: MessageWriter, clock: Clock) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.clients = clients
        self.offsets = offsets
        self.writer = writer
        self.clock = clock
        self.table = TransactionTable(0, 0)
        self._written_end = 0
        """CommitLog offset where the last record this service wrote ends (durable before progress moves)."""
        self._next_producer = 0
        self.ended: dict[tuple[str, Outcome], int] = {}
        """(real topic, COMMITTED or ROLLED_BACK) → transactions ended so by END_TRANSACTION (a metric)."""

    # -- start and progress -------------------------------------------------------

    def recover(self) -> TransactionRecovery:
        """Resume from the persisted offsets and rebuild the table from the two queues."""
        notes: list[str] = []
        half, op = self._resume(TRANS_HALF_TOPIC, notes), self._resume(TRANS_OP_HALF_TOPIC, notes)
        self.table = TransactionTable(half, op)
        self.catch_up()
        t = self.table
        report = TransactionRecovery(half, op, t.half_scanned, t.op_scanned, len(t.open), tuple(notes))
        log.info("transactions resumed: %s", report)
        return report

    def _resume(self, topic: str, notes: list[str]) -> int:
        lo, hi = self.store.get_min_offset(topic, 0), self.store.get_max_offset(topic, 0)
        offset = self.offsets.query(TRANS_GROUP, topic, 0)
        if offset is None:
            return lo
        if offset > hi:
            notes.append(f"{topic} ends at {hi}, before the persisted {offset} (a crash cut the CommitLog)")
        elif offset < lo:
            notes.append(f"{topic} starts at {lo}, after the persisted {offset} (retention removed entries)")
        return min(max(offset, lo), hi)

    def catch_up(self) -> None:
        """Read what the op queue, then the half queue, gained since the last look."""
        t = self.table
        for queue_offset, record in read_queue(self.store, TRANS_OP_HALF_TOPIC, t.op_scanned):
            t.see_op(queue_offset, parse_op(record))
        for queue_offset, record in read_queue(self.store, TRANS_HALF_TOPIC, t.half_scanned):
            half = parse_half(record)
            if isinstance(half, str):
                log.error("passing over half-queue entry %d: %s", queue_offset, half)
                t.skip_half(queue_offset)
            else:
                t.see_half(half, self.config.transaction_time_out_ms)

    async def commit_progress(self) -> None:
        """Hand the settled half and op offsets to the consumer-offset table (persisted with it)."""
        self.catch_up()
        written = self._written_end
        half, op = self.table.settle()
        if written > self.store.flushed_offset:
            await asyncio.to_thread(self.store.flush)
        self._commit_offset(TRANS_HALF_TOPIC, half)
        self._commit_offset(TRANS_OP_HALF_TOPIC, op)

    def _commit_offset(self, topic: str, offset: int) -> None:
        """Commit, unless the queue was never read past its start (then `recover` starts there
        anyway, and a broker without transactions keeps consumerOffset.json free of them)."""
        if self.offsets.query(TRANS_GROUP, topic, 0) is not None or offset > self.store.get_min_offset(topic, 0):
            self.offsets.commit(TRANS_GROUP, topic, 0, offset)

    def services(self) -> list[Periodic]:
        """The check rounds and the progress commits, for the broker to start and stop."""
        cfg = self.config
        return [
            Periodic("transaction-check", cfg.transaction_check_interval_ms / 1000, self._round),
            Periodic("transaction-progress", cfg.flush_consumer_offset_interval_ms / 1000, self.commit_progress),
        ]

    async def _round(self) -> None:
        report = await self.check_round()
        if report != CheckReport():
            log.info("transaction check round: %s", report)

    # -- END_TRANSACTION ---------------------------------------------------------

    def end_transaction(self, h: EndTransactionRequestHeader) -> EndResult:
        """Commit, roll back or leave open the transaction of the half message ``h`` names."""
        decision = h.commit_or_rollback
        if decision not in (UNKNOWN, COMMIT, ROLLBACK):
            return EndResult(EndStatus.BAD_DECISION,
                             f"commitOrRollback {decision} is not 0 (unknown), 8 (commit) or 12 (rollback)")
        found = self._half_for(h)
        if isinstance(found, EndResult):
            return found
        record, half = found
        if decision == UNKNOWN:
            return EndResult(EndStatus.LEFT_OPEN, "the local transaction's state is unknown: nothing done; the "
                                                  "broker will ask the producer group after transactionTimeOut")
        self.catch_up()
        outcome = Outcome.COMMITTED if decision == COMMIT else Outcome.ROLLED_BACK
        if half.origin not in self.table.open:
            return self._already(half, outcome)
        put = None
        if outcome is Outcome.COMMITTED:
            made = commit_input(record, half, self.writer)
            if isinstance(made, str):
                return EndResult(EndStatus.COMMIT_REFUSED, f"the committed message cannot be stored: {made}")
            put = self._put(made)
            if not put.ok:
                return EndResult(EndStatus.PUT_FAILED, put.reason or put.status.name, put)
        self._close(half.origin, outcome)
        key = (half.real_topic, outcome)
        self.ended[key] = self.ended.get(key, 0) + 1
        return EndResult(EndStatus.COMMITTED if put is not None else EndStatus.ROLLED_BACK, "", put)

    def _half_for(self, h: EndTransactionRequestHeader) -> tuple[bytes, HalfRecord] | EndResult:
        """The half record END_TRANSACTION names, checked as RocketMQ checks it, or the refusal."""
        where = f"CommitLog offset {h.commit_log_offset}"
        record = self.store.read_record(h.commit_log_offset) if h.commit_log_offset >= 0 else None
        half = parse_half(record) if record is not None else f"no message is stored at {where}"
        if isinstance(half, str):
            return EndResult(EndStatus.NOT_FOUND, f"no half message to end: {half}")
        if half.group != h.producer_group:
            return EndResult(EndStatus.WRONG_GROUP, f"the half message at {where} belongs to producer group "
                                                    f"{half.group!r}, not {h.producer_group!r}")
        if half.commit_log_offset != h.commit_log_offset:
            return EndResult(EndStatus.NOT_FOUND, f"no half message starts at {where}")
        if half.queue_offset != h.tran_state_table_offset:
            return EndResult(EndStatus.WRONG_OFFSET, f"the half message at {where} has tranStateTableOffset "
                                                     f"{half.queue_offset}, not {h.tran_state_table_offset}")
        assert record is not None
        return record, half

    def _already(self, half: HalfRecord, outcome: Outcome) -> EndResult:
        closed = self.table.closed.get(half.origin)
        if closed is not None and closed.outcome is outcome:
            return EndResult(EndStatus.ALREADY_DONE, f"the transaction was already {outcome.value}: nothing done")
        how = closed.outcome.value if closed is not None else Outcome.RESOLVED.value
        verb = "commit" if outcome is Outcome.COMMITTED else "rollback"
        return EndResult(EndStatus.ALREADY_CLOSED, f"the transaction of message {half.uniq_key} was already {how}; "
                                                   f"the {verb} is refused and nothing was done")

    def _close(self, origin: int, outcome: Outcome) -> None:
        """Close in the table at once (a duplicate arriving meanwhile is refused), then write the op."""
        self.table.close(origin, outcome)
        put = self._put(op_input(origin, self.clock.now_ms(), self.store.store_host))
        if not put.ok:
            log.error("the op record of the transaction at half offset %d (%s) was not stored: %s; after a "
                      "restart it is open again", origin, outcome.value, put.reason or put.status.name)

    def _put(self, message: MessageInput) -> PutResult:
        put = self.store.put_messages([message])
        if put.ok:
            self._written_end = max(self._written_end, put.physical_offset + put.wrote_bytes)
        return put

    # -- checks -------------------------------------------------------------------

    async def check_round(self) -> CheckReport:
        """One round over the open transactions that are due."""
        self.catch_up()
        counts: collections.Counter[str] = collections.Counter()
        for n, tx in enumerate(self.table.due(self.clock.now_ms())):
            if n and n % CHECKS_PER_STEP == 0:
                await asyncio.sleep(0)
            if self.table.open.get(tx.origin) is tx:
                counts[self._check(tx)] += 1
        return CheckReport(**counts)

    def _check(self, tx: OpenTransaction) -> str:
        """Handle one due transaction; the name of the `CheckReport` count it adds to."""
        record = self.store.read_record(tx.commit_log_offset)
        if record is None:
            log.error("the half message of the transaction at half offset %d is gone (retention): closed", tx.origin)
            self._close(tx.origin, Outcome.DISCARDED)
            return "discarded"
        if tx.check_times >= self.config.transaction_check_max or not tx.group:
            return self._discard(tx, record)
        producer = self._producer(tx.group)
        copy = self._copy(tx, record, tx.check_times + (producer is not None))
        if copy is None:
            return "failed"
        if producer is None:
            return "waiting"
        copy_record, half = copy
        try:
            producer.conn.send_oneway(check_command(copy_record, half))
        except ConnectionClosed:
            log.info("producer %s of %s left before its check was sent", producer.client_id, tx.group)
        return "checked"

    def _producer(self, group: str) -> ClientChannel | None:
        """A connected producer of ``group``, taking turns between them."""
        live = [c for c in self.clients.producer_channels(group) if not c.conn.is_closed]
        if not live:
            return None
        self._next_producer += 1
        return live[self._next_producer % len(live)]

    def _copy(self, tx: OpenTransaction, record: bytes, check_times: int) -> tuple[bytes, HalfRecord] | None:
        put = self._put(copy_input(record, tx.origin, check_times))
        copied = self.store.read_record(put.physical_offset) if put.ok else None
        half = parse_half(copied) if copied is not None else None
        if not isinstance(half, HalfRecord):
            log.error("the half message of the transaction at half offset %d could not be re-put: %s", tx.origin,
                      put.reason or put.status.name)
            return None
        assert copied is not None
        self.table.copied(tx.origin, half.queue_offset, half.commit_log_offset, check_times)
        return copied, half

    def _discard(self, tx: OpenTransaction, record: bytes) -> str:
        self.topics.find_or_create(TRANS_CHECK_MAX_TIME_TOPIC, 1, READ_WRITE)
        put = self._put(discard_input(record))
        if not put.ok:
            log.error("the transaction at half offset %d could not be moved to %s: %s", tx.origin,
                      TRANS_CHECK_MAX_TIME_TOPIC, put.reason or put.status.name)
            return "failed"
        why = f"checked {tx.check_times} times" if tx.group else "its half message names no producer group"
        log.warning("transaction at half offset %d of group %r discarded (%s): moved to %s as %s", tx.origin,
                    tx.group, why, TRANS_CHECK_MAX_TIME_TOPIC, put.offset_msg_ids[0])
        self._close(tx.origin, Outcome.DISCARDED)
        return "discarded"
