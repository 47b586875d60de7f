"""Transactional messages through real NameServer and broker processes: commit,
rollback, check-backs (answered by the first producer or by a restarted one),
a broker restart with transactions open, and END_TRANSACTION as the C++ client sends it.

The brokers check every 300 ms for transactions older than 1 s, so a check-back
comes within about 1.5 s; every wait has a deadline."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest

from skiff.client import AsyncTransactionProducer, LocalTransactionState, Message, MessageExt, TransactionProducer
from skiff.common.msgid import UNIQ_IDS, decode_offset_msg_id
from skiff.common.names import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_OP_HALF_TOPIC
from skiff.common.properties import Prop
from skiff.common.stored_message import StoredMessage
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.message_codec import send_properties
from skiff.testing.cluster import Cluster
from skiff.testing.waits import eventually, wait_for
from skiff.testing.wire import BrokerWire, send_header, with_wire
from skiff.transport.loop import run_coroutine

COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)
FAST_CHECKS = ("--transactionTimeOut=1000", "--transactionCheckInterval=300")
ROOMY = "--transactionCheckMax=100"
"""Open transactions survive a slow test on a busy machine instead of being discarded after 15 rounds (4.5 s)."""
QUEUES = 4
"""Queues a topic auto-created by our producer gets."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with Cluster(tmp_path_factory.mktemp("tx"), broker_args=(*FAST_CHECKS, ROOMY)) as c:
        yield c


async def delivered(wire: BrokerWire, topic: str) -> list[StoredMessage]:
    """Every consumable message of ``topic`` on the broker."""
    out: list[StoredMessage] = []
    for q in range(QUEUES):
        out += await wire.pull_messages("G-watch", topic, q)
    return out


async def closed_origins(wire: BrokerWire) -> list[int]:
    """The half offsets the broker's op records have closed, in order."""
    return [int(m.body) for m in await wire.pull_messages("G-watch", TRANS_OP_HALF_TOPIC, 0)]


class Checks:
    """A checker that answers from a table and records what it was asked."""

    def __init__(self, answers: dict[str, LocalTransactionState] | None = None) -> None:
        self.answers = answers or {}
        self.asked: list[MessageExt] = []

    def __call__(self, msg: MessageExt) -> LocalTransactionState:
        self.asked.append(msg)
        return self.answers.get(msg.body.decode(), UNKNOW)

    def times(self, body: bytes) -> list[int]:
        return [int(m.properties[Prop.TRANSACTION_CHECK_TIMES]) for m in self.asked if m.body == body]


def answer(state: LocalTransactionState):
    def local(msg: Message, arg: object) -> LocalTransactionState:
        return state
    return local


def test_commit_delivers_once_and_rollback_never(cluster: Cluster):
    with TransactionProducer("PG-basic", cluster.namesrv_addr, checker=Checks(), instance_name="tx-basic") as producer:
        seen: list[tuple[bytes, str]] = []

        def local(msg: Message, arg: str) -> LocalTransactionState:
            seen.append((msg.body, arg))
            return COMMIT if arg == "yes" else ROLLBACK

        ok = producer.send_in_transaction(Message.of("TxBasic", b"order-1", keys="k1", tags="paid"), local, "yes")
        no = producer.send_in_transaction(Message.of("TxBasic", b"order-2", keys="k2"), local, "no")
    assert seen == [(b"order-1", "yes"), (b"order-2", "no")]  # ran in this thread, with the arg
    assert (ok.local_transaction_state, no.local_transaction_state, ok.local_error) == (COMMIT, ROLLBACK, None)

    async def check(wire: BrokerWire) -> None:
        await eventually(lambda: _has(closed_origins(wire), {ok.queue_offset, no.queue_offset}), 10, "both ops")
        [msg] = await delivered(wire, "TxBasic")
        assert (msg.body, msg.msg_id, msg.keys, msg.tags) == (b"order-1", ok.msg_id, ["k1"], "paid")
        assert (msg.topic, msg.queue_id) == ("TxBasic", ok.message_queue.queue_id)
        assert Prop.TRAN_MSG not in msg.properties and msg.properties[Prop.PGROUP] == "PG-basic"
        assert msg.prepared_transaction_offset == decode_offset_msg_id(ok.offset_msg_id).physical_offset
    with_wire(cluster.broker_addr(), check)


async def _has(awaitable, wanted: set[int]) -> bool:
    return wanted <= set(await awaitable)


def test_unknown_then_the_checker_decides(cluster: Cluster):
    async def main() -> None:
        checks = Checks({"commit-me": COMMIT, "drop-me": ROLLBACK, "bad-answer": ROLLBACK})

        async def local(msg: Message, arg: object) -> LocalTransactionState:
            if msg.body == b"raise":
                raise RuntimeError("the database went away")
            return "maybe" if msg.body == b"bad-answer" else UNKNOW  # type: ignore[return-value]

        wire = BrokerWire(cluster.broker_addr())
        async with AsyncTransactionProducer("PG-check", cluster.namesrv_addr, checker=checks, check_threads=2,
                                            instance_name="tx-check") as producer:
            results = {body: await producer.send_in_transaction(Message.of("TxCheck", body), local)
                       for body in (b"commit-me", b"drop-me", b"raise", b"bad-answer")}
            assert await delivered(wire, "TxCheck") == []  # nothing before the producer answers
            assert [r.local_transaction_state for r in results.values()] == [UNKNOW] * 4
            assert repr(results[b"raise"].local_error) == "RuntimeError('the database went away')"
            assert str(results[b"bad-answer"].local_error) == (
                "the local transaction answered 'maybe', not a LocalTransactionState")
            checks.answers["raise"] = COMMIT
            origins = {r.queue_offset for r in results.values()}
            await eventually(lambda: _has(closed_origins(wire), origins), 15, "the checker's answers")
        got = await delivered(wire, "TxCheck")
        await wire.close()
        assert sorted((m.body, m.msg_id) for m in got) == sorted(
            (b, results[b].msg_id) for b in (b"commit-me", b"raise"))
        asked = {m.body: m for m in checks.asked}
        assert set(asked) == {b"commit-me", b"drop-me", b"raise", b"bad-answer"}
        first = asked[b"commit-me"]
        assert (first.topic, first.queue_id, first.properties[Prop.PGROUP]) == (
            "TxCheck", results[b"commit-me"].message_queue.queue_id, "PG-check")
        assert first.msg_id == results[b"commit-me"].msg_id
    run_coroutine(main())


def test_a_restarted_producer_answers_the_check(cluster: Cluster):
    async def main() -> None:
        first = AsyncTransactionProducer("PG-restart", cluster.namesrv_addr, checker=Checks(),
                                         instance_name="tx-restart-1")
        await first.start()
        sent = await first.send_in_transaction(Message.of("TxRestart", b"left-open"), answer(UNKNOW))
        await first.shutdown()  # gone before the broker asks

        checks = Checks({"left-open": COMMIT})

        async def check(msg: MessageExt) -> LocalTransactionState:  # a coroutine checker, awaited on the loop
            return checks(msg)

        wire = BrokerWire(cluster.broker_addr())
        async with AsyncTransactionProducer("PG-restart", cluster.namesrv_addr, checker=check,
                                            instance_name="tx-restart-2"):
            got = await eventually(lambda: delivered(wire, "TxRestart"), 15, "the message the new producer commits")
        await wire.close()
        assert [(m.body, m.msg_id) for m in got] == [(b"left-open", sent.msg_id)]
        assert {m.msg_id for m in checks.asked} == {sent.msg_id}
    run_coroutine(main())


def test_open_transactions_survive_a_broker_restart(cluster: Cluster):
    bodies = [f"tx-{i}".encode() for i in range(5)]
    first = Checks()  # answers UNKNOW: everything stays open
    with TransactionProducer("PG-survive", cluster.namesrv_addr, checker=first,
                             instance_name="tx-survive-1") as producer:
        early = producer.send_in_transaction(Message.of("TxSurvive", b"committed-early"), answer(COMMIT))
        open_ = {b: producer.send_in_transaction(Message.of("TxSurvive", b), answer(UNKNOW)) for b in bodies}
        wait_for(lambda: all(first.times(b) for b in bodies), 15, "a first check of each")
    before = {b: max(first.times(b)) for b in bodies}

    cluster.restart_broker(0)
    decide = {b.decode(): COMMIT if i % 2 == 0 else ROLLBACK for i, b in enumerate(bodies)}
    second = Checks(decide)
    with TransactionProducer("PG-survive", cluster.namesrv_addr, checker=second, instance_name="tx-survive-2"):
        async def all_closed(wire: BrokerWire) -> None:
            wanted = {r.queue_offset for r in open_.values()} | {early.queue_offset}
            await eventually(lambda: _has(closed_origins(wire), wanted), 20, "every transaction closed")
        with_wire(cluster.broker_addr(), all_closed)

    async def check(wire: BrokerWire) -> None:
        got = collections.Counter((m.body, m.msg_id) for m in await delivered(wire, "TxSurvive"))
        wanted = {(b"committed-early", early.msg_id)} | {(b, open_[b].msg_id) for b in bodies[0::2]}
        assert got == collections.Counter(wanted)  # each committed one exactly once, no rolled-back one
        origins = await closed_origins(wire)
        assert len(origins) == len(set(origins))  # each transaction closed once
    with_wire(cluster.broker_addr(), check)
    for b in bodies:  # the check count went on from where it was: persisted in the CommitLog
        assert min(second.times(b)) > before[b], (b, before[b], second.times(b))


def test_end_transaction_refusals_and_the_cpp_clients_form(cluster: Cluster):
    async def test(wire: BrokerWire) -> None:
        uniq = UNIQ_IDS.next_id()
        props = send_properties(Message.of("TxWire", b"from-cpp", properties={Prop.TRAN_MSG: "true",
                                                                            Prop.PGROUP: "PG-cpp"}), uniq)
        sent = await wire.call(RequestCode.SEND_MESSAGE, send_header(RequestCode.SEND_MESSAGE, "TxWire", 1, props,
                                                                     group="PG-cpp", sys_flag=4), b"from-cpp")
        assert sent.code == ResponseCode.SUCCESS
        table_offset = sent.ext("queueOffset")
        phys = str(decode_offset_msg_id(sent.ext("msgId")).physical_offset)

        def end(**changes: str) -> dict[str, str]:  # every value a string, as the C++ client sends them
            ext = {"producerGroup": "PG-cpp", "tranStateTableOffset": table_offset, "commitLogOffset": phys,
                   "commitOrRollback": "8", "fromTransactionCheck": "0", "msgId": uniq, "transactionId": ""}
            return {**ext, **changes}

        wrong_group = await wire.call(RequestCode.END_TRANSACTION, end(producerGroup="PG-other"))
        assert (wrong_group.code, wrong_group.remark) == (
            ResponseCode.SYSTEM_ERROR,
            f"the half message at CommitLog offset {phys} belongs to producer group 'PG-cpp', not 'PG-other'")
        wrong_offset = await wire.call(RequestCode.END_TRANSACTION, end(tranStateTableOffset="999"))
        assert wrong_offset.code == ResponseCode.SYSTEM_ERROR
        assert wrong_offset.remark == (f"the half message at CommitLog offset {phys} has tranStateTableOffset "
                                       f"{table_offset}, not 999")
        nowhere = await wire.call(RequestCode.END_TRANSACTION, end(commitLogOffset=str(int(phys) + 1)))
        assert nowhere.code == ResponseCode.SYSTEM_ERROR and "no message is stored at CommitLog offset" in nowhere.remark
        assert await delivered(wire, "TxWire") == []

        unknown = await wire.call(RequestCode.END_TRANSACTION, end(commitOrRollback="0"))
        assert unknown.code == ResponseCode.SUCCESS and "nothing done" in unknown.remark
        committed = await wire.call(RequestCode.END_TRANSACTION, end())
        assert (committed.code, committed.remark) == (ResponseCode.SUCCESS, None)
        again = await wire.call(RequestCode.END_TRANSACTION, end(fromTransactionCheck="1", transactionId=uniq))
        assert (again.code, again.remark) == (ResponseCode.SUCCESS,
                                              "the transaction was already committed: nothing done")
        late_rollback = await wire.call(RequestCode.END_TRANSACTION, end(commitOrRollback="12"))
        assert late_rollback.code == ResponseCode.TRANSACTION_FAILED and "rollback is refused" in late_rollback.remark
        [msg] = await delivered(wire, "TxWire")
        assert (msg.body, msg.msg_id, msg.queue_id) == (b"from-cpp", uniq, 1)
    with_wire(cluster.broker_addr(), test)


def test_a_transaction_checked_too_often_is_discarded(tmp_path):
    args = (*FAST_CHECKS, "--transactionCheckMax=2")
    with Cluster(tmp_path, broker_args=args) as small:
        checks = Checks()
        with TransactionProducer("PG-max", small.namesrv_addr, checker=checks, instance_name="tx-max") as producer:
            sent = producer.send_in_transaction(Message.of("TxMax", b"never-decided", keys="k-max"), answer(UNKNOW))

            async def discarded(wire: BrokerWire) -> None:
                [parked] = await eventually(lambda: wire.pull_messages("G-ops", TRANS_CHECK_MAX_TIME_TOPIC, 0), 15,
                                            "the discarded message")
                assert (parked.body, parked.msg_id, parked.keys) == (b"never-decided", sent.msg_id, ["k-max"])
                assert (parked.properties[Prop.REAL_TOPIC], parked.properties[Prop.TRANSACTION_CHECK_TIMES]) == (
                    "TxMax", "2")
                assert await closed_origins(wire) == [sent.queue_offset]
                assert await delivered(wire, "TxMax") == []
            with_wire(small.broker_addr(), discarded)
        assert checks.times(b"never-decided") == [1, 2]
        assert "discarded (checked 2 times)" in small.broker(0).output


def test_the_example_runs(cluster: Cluster):
    example = Path(__file__).resolve().parents[2] / "examples" / "transaction.py"
    done = subprocess.run([sys.executable, str(example), "--namesrv", cluster.namesrv_addr, "--topic", "TxExample"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert set(lines) == {"order-1", "order-2", "order-3", "consumed"}
    assert lines["order-1"].startswith("COMMIT_MESSAGE") and lines["order-2"].startswith("ROLLBACK_MESSAGE")
    assert lines["order-3"].startswith("UNKNOW")
    assert sorted(lines["consumed"].split()) == ["order-1", "order-3"]  # order-3 committed by the checker

