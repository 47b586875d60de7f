"""The transaction service over a real store, with a clock that moves only when told:
END_TRANSACTION's checks and outcomes, check rounds (the CHECK_TRANSACTION_STATE each
sends travels over a real loopback connection), discards, and rebuilding after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.broker.clients import ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations import EndTransactionOperation
from skiff.broker.processors.end_transaction import CODES, EndTransactionProcessor
from skiff.broker.redirect import DelayPolicy
from skiff.broker.topics import TopicConfigManager
from skiff.broker.transactions import CheckReport, EndStatus, TransactionService
from skiff.broker.writer import MessageWriter
from skiff.common.clock import ManualClock
from skiff.common.config import build_config
from skiff.common.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_GROUP, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from skiff.common.properties import Prop
from skiff.common.record import pack_host
from skiff.common.stored_message import StoredMessage, decode_records
from skiff.common.sysflag import MessageSysFlag, transaction_type
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.transaction import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from skiff.protocol.message_codec import decode_stored_messages
from skiff.store import MessageStore, PutResult, StoreConfig
from skiff.transport import RemotingClient, RemotingServer
from skiff.transport.connection import Connection

STORE_HOST = pack_host("127.0.0.1", 10911)
BORN_HOST = pack_host("10.0.0.7", 40000)
COMMIT, ROLLBACK = 8, 12
TIMEOUT_MS, CHECK_MAX = 6_000, 3


class Broker:
    """The parts of a broker the transaction service works with, on a real store."""

    def __init__(self, root: Path, clock: ManualClock, flush: str = "ASYNC_FLUSH") -> None:
        self.clock = clock
        self.config = BrokerConfig(broker_name="broker-a", transaction_time_out_ms=TIMEOUT_MS,
                                   transaction_check_max=CHECK_MAX)
        store_config = build_config(StoreConfig, {"storePathRootDir": str(root), "mappedFileSizeCommitLog": 1 << 20,
                                                  "maxHashSlotNum": 64, "maxIndexNum": 256, "flushDiskType": flush})
        self.store = MessageStore(store_config, store_host=STORE_HOST, clock=clock)
        self.store.start()
        self.topics = TopicConfigManager(self.config, str(root), clock, schedule_queue_nums=19)
        self.topics.load()
        self.offsets = ConsumerOffsetManager(str(root))
        self.offsets.load()
        self.clients = ClientManager(clock, 120_000)
        self.writer = MessageWriter(DelayPolicy((1000,), 10_000), clock)
        self.tx = TransactionService(self.config, self.store, self.topics, self.clients, self.offsets, self.writer,
                                     clock)
        self.recovery = self.tx.recover()

    def half(self, body: bytes, *, group: str = "PG", topic: str = "Orders", queue_id: int = 1,
             **props: str) -> PutResult:
        """A half message stored the way the send path stores one."""
        all_props = {Prop.TRAN_MSG: "true", Prop.PGROUP: group, Prop.UNIQ_KEY: f"U-{body.decode()}",
                     Prop.KEYS: f"k-{body.decode()}", Prop.TAGS: "created", "shop": "eu", **props}
        made = self.writer.message(topic, queue_id, body, all_props, None, 0, int(MessageSysFlag.TRANSACTION_PREPARED),
                                   1_000, BORN_HOST)
        assert not isinstance(made, str), made
        put = self.store.put_messages([made])
        assert put.ok
        return put

    def end(self, half: PutResult, decision: int, *, group: str = "PG", offset: int | None = None,
            from_check: bool = False):
        h = EndTransactionRequestHeader(group, half.queue_offset if offset is None else offset,
                                        half.physical_offset, decision, "U", from_check)
        return self.tx.end_transaction(h)

    def read(self, topic: str, queue_id: int = 0) -> list[StoredMessage]:
        got = self.store.get_messages(topic, queue_id, 0, 100)
        return decode_records(b"".join(bytes(b) for b in got.buffers)) if got.found else []

    def close(self) -> None:
        self.offsets.persist()
        self.store.shutdown()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock)
    yield b
    if b.store.running:
        b.store.shutdown()


def ops(b: Broker) -> list[bytes]:
    return [m.body for m in b.read(TRANS_OP_HALF_TOPIC)]


def test_commit_delivers_the_message_once_as_it_was_sent(broker: Broker):
    half = broker.half(b"tx-1")
    assert broker.read("Orders", 1) == []  # a half message is out of consumers' sight
    result = broker.end(half, COMMIT)
    assert result.status is EndStatus.COMMITTED
    [msg] = broker.read("Orders", 1)
    assert (msg.body, msg.msg_id, msg.keys, msg.tags, msg.properties["shop"]) == (
        b"tx-1", "U-tx-1", ["k-tx-1"], "created", "eu")
    assert msg.properties[Prop.PGROUP] == "PG"
    assert not {Prop.TRAN_MSG, Prop.REAL_TOPIC, Prop.REAL_QID} & set(msg.properties)
    assert transaction_type(msg.sys_flag) == COMMIT
    assert msg.prepared_transaction_offset == half.physical_offset
    assert ops(broker) == [b"0"]
    op = broker.read(TRANS_OP_HALF_TOPIC)[0]
    assert op.tags == "d"

    again = broker.end(half, COMMIT, from_check=True)
    assert (again.status, again.remark) == (EndStatus.ALREADY_DONE, "the transaction was already committed: nothing done")
    refused = broker.end(half, ROLLBACK)
    assert refused.status is EndStatus.ALREADY_CLOSED and "already committed; the rollback is refused" in refused.remark
    assert len(broker.read("Orders", 1)) == 1 and ops(broker) == [b"0"]


def test_rollback_discards_and_unknown_leaves_open(broker: Broker):
    first, second = broker.half(b"tx-1"), broker.half(b"tx-2")
    assert broker.end(second, 0).status is EndStatus.LEFT_OPEN
    assert broker.end(first, ROLLBACK).status is EndStatus.ROLLED_BACK
    assert broker.read("Orders", 1) == [] and ops(broker) == [b"0"]
    assert set(broker.tx.table.open) == {1}
    assert broker.end(first, COMMIT).status is EndStatus.ALREADY_CLOSED
    assert broker.read("Orders", 1) == []


def test_end_transaction_refuses_what_does_not_match_the_half_message(broker: Broker):
    half = broker.half(b"tx-1")
    plain = broker.store.put_messages([broker.writer.message("Orders", 0, b"plain", {}, None, 0, 0, 1, BORN_HOST)])
    cases = [
        (broker.end(half, COMMIT, group="Other"), EndStatus.WRONG_GROUP, "belongs to producer group 'PG', not 'Other'"),
        (broker.end(half, COMMIT, offset=7), EndStatus.WRONG_OFFSET, "has tranStateTableOffset 0, not 7"),
        (broker.end(plain, COMMIT), EndStatus.NOT_FOUND, "is in topic Orders, not a half message"),
        (broker.tx.end_transaction(EndTransactionRequestHeader("PG", 0, half.physical_offset + 4, COMMIT, "U")),
         EndStatus.NOT_FOUND, "no message is stored at CommitLog offset"),
        (broker.tx.end_transaction(EndTransactionRequestHeader("PG", 0, 1 << 40, COMMIT, "U")),
         EndStatus.NOT_FOUND, "no message is stored at CommitLog offset 1099511627776"),
        (broker.end(half, 4), EndStatus.BAD_DECISION, "commitOrRollback 4 is not 0 (unknown), 8 (commit) or 12"),
    ]
    for result, status, remark in cases:
        assert result.status is status and remark in result.remark, result
    assert broker.read("Orders", 1) == [] and ops(broker) == []
    assert broker.end(half, COMMIT).status is EndStatus.COMMITTED  # nothing above touched it


def test_a_delay_on_a_committed_message_still_delays_it(broker: Broker):
    half = broker.half(b"tx-late", **{Prop.DELAY: "1"})
    assert broker.end(half, COMMIT).status is EndStatus.COMMITTED
    assert broker.read("Orders", 1) == []
    [parked] = broker.read("SCHEDULE_TOPIC_XXXX", 0)
    assert (parked.body, parked.properties[Prop.REAL_TOPIC], transaction_type(parked.sys_flag)) == (
        b"tx-late", "Orders", COMMIT)


class Producer:
    """A producer's connection to the broker over loopback: CHECK_TRANSACTION_STATE lands in ``checks``."""

    def __init__(self) -> None:
        self.checks: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.server = RemotingServer("127.0.0.1", 0, {})
        self.client = RemotingClient({RequestCode.CHECK_TRANSACTION_STATE: self._on_check})

    def _on_check(self, conn: Connection, req: RemotingCommand) -> None:
        self.checks.put_nowait(req)

    async def connect(self) -> Connection:
        await self.server.start()
        await self.client.connection(f"127.0.0.1:{self.server.port}")
        while not self.server.connections:
            await asyncio.sleep(0.01)
        return self.server.connections[0]

    async def close(self) -> None:
        await self.client.close()
        await self.server.stop(1.0)


def test_checks_count_wait_for_a_producer_and_end_by_discarding(broker: Broker, clock: ManualClock):
    async def main() -> None:
        half = broker.half(b"tx-1")
        immune = broker.half(b"tx-2", **{Prop.CHECK_IMMUNITY_TIME_IN_SECONDS: "30"})
        assert await broker.tx.check_round() == CheckReport()
        clock.advance(TIMEOUT_MS)
        assert await broker.tx.check_round() == CheckReport(waiting=1)  # nobody of PG is connected
        producer = Producer()
        conn = await producer.connect()
        broker.clients.register_producer("PG", broker.clients.channel(conn, "client-1", "PYTHON", 1))
        try:
            for times in range(1, CHECK_MAX + 1):
                clock.advance(60_000)
                assert await broker.tx.check_round() == CheckReport(checked=2)  # tx-2's 30 s have passed too
                checks = [await asyncio.wait_for(producer.checks.get(), 5) for _ in range(2)]
                mine = next(c for c in checks if decode_stored_messages(c.body)[0].body == b"tx-1")
                h = CheckTransactionStateRequestHeader.from_ext(mine.ext_fields)
                [msg] = decode_stored_messages(mine.body)
                assert (msg.topic, msg.queue_id, msg.properties[Prop.PGROUP]) == ("Orders", 1, "PG")
                assert msg.properties[Prop.TRANSACTION_CHECK_TIMES] == str(times)
                assert msg.properties[Prop.TRAN_PREPARED_QUEUE_OFFSET] == "0"
                assert (h.msg_id, h.transaction_id) == ("U-tx-1", "U-tx-1")
                assert (h.tran_state_table_offset, h.commit_log_offset) == (msg.queue_offset, msg.commit_log_offset)
                assert h.offset_msg_id == msg.offset_msg_id and mine.is_oneway
            clock.advance(60_000)
            assert await broker.tx.check_round() == CheckReport(discarded=2)
        finally:
            await producer.close()
        discarded = broker.read(TRANS_CHECK_MAX_TIME_TOPIC)
        assert sorted(m.body for m in discarded) == [b"tx-1", b"tx-2"]
        assert discarded[0].properties[Prop.REAL_TOPIC] == "Orders"
        assert broker.tx.table.open == {}
        assert broker.end(half, COMMIT).status is EndStatus.ALREADY_CLOSED
        assert broker.end(immune, COMMIT).status is EndStatus.ALREADY_CLOSED
        assert broker.read("Orders", 1) == []
    asyncio.run(main())


def test_immunity_time_delays_the_first_check(broker: Broker, clock: ManualClock):
    broker.half(b"tx-1", **{Prop.CHECK_IMMUNITY_TIME_IN_SECONDS: "30"})
    broker.half(b"tx-2", **{Prop.CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})  # shorter than the timeout: the timeout wins
    broker.tx.catch_up()
    clock.advance(TIMEOUT_MS - 1)
    assert [tx.origin for tx in broker.tx.table.due(clock.now_ms())] == []
    clock.advance(1)
    assert [tx.origin for tx in broker.tx.table.due(clock.now_ms())] == [1]
    clock.advance(30_000 - TIMEOUT_MS)
    assert [tx.origin for tx in broker.tx.table.due(clock.now_ms())] == [0, 1]


def test_an_answer_to_any_copy_ends_the_transaction_once(broker: Broker, clock: ManualClock):
    first = broker.half(b"tx-1")
    clock.advance(TIMEOUT_MS)
    asyncio.run(broker.tx.check_round())  # no producer: re-put, not counted
    copy = broker.read(TRANS_HALF_TOPIC)[-1]
    assert (copy.queue_offset, copy.properties[Prop.TRANSACTION_CHECK_TIMES]) == (1, "0")
    answer = EndTransactionRequestHeader("PG", copy.queue_offset, copy.commit_log_offset, COMMIT, "U", True)
    assert broker.tx.end_transaction(answer).status is EndStatus.COMMITTED
    assert broker.end(first, COMMIT).status is EndStatus.ALREADY_DONE  # the producer's own late commit
    assert [m.body for m in broker.read("Orders", 1)] == [b"tx-1"]
    assert ops(broker) == [b"0"]  # the op names the transaction's first half message


def test_state_is_rebuilt_after_a_restart(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock)
    checked, committed, rolled_back, fresh = (b.half(f"tx-{i}".encode()) for i in range(4))
    clock.advance(TIMEOUT_MS)
    asyncio.run(b.tx.check_round())  # four copies (no producer)
    assert b.end(committed, COMMIT).status is EndStatus.COMMITTED
    assert b.end(rolled_back, ROLLBACK).status is EndStatus.ROLLED_BACK
    asyncio.run(b.tx.check_round())  # two more copies: checked and fresh
    asyncio.run(b.tx.commit_progress())
    assert b.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0) == 8
    assert b.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0) == 2
    b.close()

    again = Broker(tmp_path, clock)
    r = again.recovery
    assert (r.half_offset, r.op_offset, r.half_scanned, r.op_scanned, r.open_transactions) == (8, 2, 10, 2, 2)
    assert {tx.origin: tx.queue_offset for tx in again.tx.table.open.values()} == {0: 8, 3: 9}
    assert again.end(committed, COMMIT).status is EndStatus.ALREADY_CLOSED
    assert again.end(checked, ROLLBACK).status is EndStatus.ROLLED_BACK  # via its first half message
    assert again.end(fresh, COMMIT).status is EndStatus.COMMITTED
    assert [m.body for m in again.read("Orders", 1)] == [b"tx-1", b"tx-3"]
    again.close()


def test_progress_waits_for_an_open_transaction_and_keeps_its_op_window(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock)
    stuck = b.half(b"stuck")
    done = [b.half(f"done-{i}".encode()) for i in range(3)]
    for put in done:
        b.end(put, COMMIT)
    asyncio.run(b.tx.commit_progress())
    # The stuck one holds both offsets at the queues' starts (nothing to write): a restart reads the three ops again.
    assert (b.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0), b.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0)) \
        == (None, None)
    b.close()
    again = Broker(tmp_path, clock)
    assert set(again.tx.table.open) == {0}
    assert [again.end(put, COMMIT).status for put in done] == [EndStatus.ALREADY_CLOSED] * 3
    assert again.end(stuck, COMMIT).status is EndStatus.COMMITTED
    asyncio.run(again.tx.commit_progress())
    assert (again.offsets.query(TRANS_GROUP, TRANS_HALF_TOPIC, 0),
            again.offsets.query(TRANS_GROUP, TRANS_OP_HALF_TOPIC, 0)) == (4, 4)
    again.close()


def test_a_half_message_without_a_group_is_discarded_when_due(broker: Broker, clock: ManualClock):
    props = {Prop.TRAN_MSG: "true", Prop.UNIQ_KEY: "U-x"}
    made = broker.writer.message("Orders", 0, b"orphan", props, None, 0, 4, 1, BORN_HOST)
    broker.store.put_messages([made])
    clock.advance(TIMEOUT_MS)
    assert asyncio.run(broker.tx.check_round()) == CheckReport(discarded=1)
    assert [m.body for m in broker.read(TRANS_CHECK_MAX_TIME_TOPIC)] == [b"orphan"]


def test_every_end_status_has_a_response_code():
    assert set(CODES) | {EndStatus.PUT_FAILED} == set(EndStatus)


def test_under_sync_flush_a_commit_is_answered_after_its_fsync(tmp_path: Path, clock: ManualClock):
    b = Broker(tmp_path, clock, flush="SYNC_FLUSH")
    half = b.half(b"tx-1")
    processor = EndTransactionProcessor(EndTransactionOperation(b.tx))
    ext = EndTransactionRequestHeader("PG", half.queue_offset, half.physical_offset, COMMIT, "U").to_ext()
    answer = processor.end_transaction(Connection({}), RemotingCommand.request(RequestCode.END_TRANSACTION, ext))
    assert not isinstance(answer, RemotingCommand)  # it waits for the fsync

    async def flushed() -> RemotingCommand:
        return await answer
    resp = asyncio.run(flushed())
    assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
    [committed] = b.read("Orders", 1)
    assert committed.commit_log_offset + committed.store_size <= b.store.flushed_offset  # durable when answered
    refused = processor.end_transaction(Connection({}), RemotingCommand.request(
        RequestCode.END_TRANSACTION, {**ext, "producerGroup": "Other"}))
    assert refused.code == ResponseCode.SYSTEM_ERROR and "not 'Other'" in refused.remark
    b.close()
