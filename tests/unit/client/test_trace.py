"""Message trace without a network: RocketMQ's trace format both ways (and as Java's
decoder splits it), packing records into trace messages, the timeline, the settings,
and what the consume hook records around a listener."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.trace_dispatcher import pack
from skiff.client._impl.trace_format import (
    CONTENT_SPLITOR,
    FIELD_SPLITOR,
    ConsumeReturnType,
    EndTransactionTrace,
    MessageType,
    PubTrace,
    SubAfterTrace,
    SubBeforeTrace,
    TraceRecord,
    decode,
    encode,
    keys_of,
)
from skiff.client._impl.trace_hooks import ConsumeTracer
from skiff.client.errors import ClientConfigError
from skiff.client.results import ConsumeOrderlyStatus, ConsumeStatus
from skiff.client.trace import TRACE_TOPIC, TraceSettings, timeline, trace_settings
from skiff.common.stored_message import StoredMessage

TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20).filter(
    lambda t: t != "null")  # Java writes a missing value as ``null``: it reads back as empty
WORD = st.text("abcXYZ019-_", min_size=1, max_size=12)
KEYS = st.lists(WORD, max_size=3).map(" ".join)
MS = st.integers(0, 2**45)

PUBS = st.builds(PubTrace, MS, TEXT, WORD, WORD, WORD, TEXT, KEYS, TEXT, st.integers(0, 2**22),
                 st.integers(0, 10**6), st.sampled_from(MessageType), WORD, st.booleans(), WORD, WORD,
                 st.integers(0, 1023), st.integers(0, 2**40))
BEFORES = st.builds(SubBeforeTrace, MS, TEXT, WORD, WORD, WORD, st.integers(0, 16), KEYS, WORD, WORD)
AFTERS = st.builds(SubAfterTrace, WORD, WORD, st.integers(0, 10**6), st.booleans(), KEYS,
                   st.sampled_from([int(c) for c in ConsumeReturnType]), MS, WORD)
ENDS = st.builds(EndTransactionTrace, MS, TEXT, WORD, WORD, WORD, TEXT, KEYS, TEXT, st.sampled_from(MessageType),
                 WORD, st.sampled_from(["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"]), st.booleans())
RECORDS = st.one_of(PUBS, BEFORES, AFTERS, ENDS)


def java_split(text: str, sep: str) -> list[str]:
    """Java's String.split: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@given(st.lists(RECORDS, max_size=6))
def test_records_round_trip(records: list[TraceRecord]) -> None:
    assert decode("".join(encode(r) for r in records)) == records


@given(RECORDS)
def test_java_decoder_finds_every_field_it_reads(record: TraceRecord) -> None:
    """RocketMQ's decoder indexes Pub up to 14, SubBefore up to 7, SubAfter up to 8."""
    (text,) = java_split(encode(record), FIELD_SPLITOR)
    fields = java_split(text, CONTENT_SPLITOR)
    needed = {PubTrace: 15, SubBeforeTrace: 8, SubAfterTrace: 9, EndTransactionTrace: 13}[type(record)]
    assert len(fields) >= needed


def test_reads_what_java_writes() -> None:
    """Traces as RocketMQ 4.9's encoder writes them: missing tags and keys as "null", a
    13-field Pub of older clients, SubAfter without its time and group."""
    c, f = CONTENT_SPLITOR, FIELD_SPLITOR
    data = (c.join(["Pub", "1700000000000", "DefaultRegion", "PG", "T", "ID1", "null", "null", "10.0.0.1:10911",
                    "5", "3", "0", "OFF1", "true"]) + f
            + c.join(["Pub", "1700000000001", "", "PG", "T", "ID2", "TagA", "k", "h:1", "5", "3", "3", "false"]) + f
            + c.join(["SubBefore", "1700000000010", "DefaultRegion", "CG", "REQ", "ID1", "2", "null"]) + f
            + c.join(["SubAfter", "REQ", "ID1", "7", "false", "null", "4", "1700000000017", "CG"]) + f
            + c.join(["SubAfter", "REQ2", "ID1", "1", "true", "k"]) + f
            + c.join(["Nonsense", "x"]) + f + c.join(["Pub", "not-a-number"]) + f)
    pub, old, before, after, short = decode(data)
    assert pub == PubTrace(1700000000000, "DefaultRegion", "PG", "T", "ID1", "", "", "10.0.0.1:10911", 5, 3,
                           MessageType.NORMAL, "OFF1", True)
    assert (old.offset_msg_id, old.success, old.msg_type) == ("", False, MessageType.DELAY)  # type: ignore[union-attr]
    assert before == SubBeforeTrace(1700000000010, "DefaultRegion", "CG", "REQ", "ID1", 2, "")
    assert after == SubAfterTrace("REQ", "ID1", 7, False, "", 4, 1700000000017, "CG")
    assert short == SubAfterTrace("REQ2", "ID1", 1, True, "k", 0, 0, "")


def test_keys_of_are_the_msg_id_and_each_key() -> None:
    record = SubBeforeTrace(1, "", "G", "R", "ID", 0, "a  b", "T")
    assert keys_of(record) == ["ID", "a", "b"]


def _pub(i: int, keys: str = "") -> PubTrace:
    return PubTrace(1_000_000 + i, "r", "G", "T", f"ID{i:030d}", "", keys, "h:1", 1, 1, MessageType.NORMAL, "O", True)


def test_pack_keeps_each_message_within_its_limits() -> None:
    records = [_pub(i, f"key-{i:03d} shared") for i in range(50)]
    one = len(encode(records[0]).encode())
    messages = list(pack(records, max_bytes=one * 10))
    assert [n for _, _, n in messages] == [10] * 5
    for data, keys, n in messages:
        assert len(data.encode()) <= one * 10 and keys.count("shared") == 1 and len(keys) == 2 * n + 1
    assert decode("".join(d for d, _, _ in messages)) == records
    by_keys = list(pack(records, max_bytes=10**6, keys_max_bytes=200))
    assert all(sum(len(k) + 1 for k in keys) <= 200 for _, keys, _ in by_keys) and len(by_keys) > 1
    (alone,) = list(pack([_pub(1, "x" * 500)], max_bytes=100, keys_max_bytes=100))
    assert alone[2] == 1, "a record over the limits still goes, alone"


def test_timeline_pairs_the_two_halves_of_a_consumption() -> None:
    send = _pub(100)  # sent at 1_000_100
    begin = SubBeforeTrace(1_000_110, "", "CG", "R1", send.msg_id, 0, "", "T", "10.0.0.2")
    end = SubAfterTrace("R1", send.msg_id, 5, True, "", 0, 1_000_115, "CG")
    open_begin = SubBeforeTrace(1_000_120, "", "CG", "R2", send.msg_id, 1, "", "T", "")
    orphan_end = SubAfterTrace("R3", send.msg_id, 4, False, "", 4, 1_000_140, "CG2")
    events = timeline([(end, "b:1"), (open_begin, "10.0.0.3:5"), (send, "p:2"), (begin, "b:1"), (orphan_end, "")])
    assert [(e.kind, e.time_ms, e.group, e.status, e.cost_ms, e.client_host, e.consume_result) for e in events] == [
        ("send", 1_000_100, "G", "success", 1, "p:2", ""),
        ("consume", 1_000_110, "CG", "success", 5, "10.0.0.2", "SUCCESS"),
        ("consume", 1_000_120, "CG", "pending", 0, "10.0.0.3:5", ""),
        ("consume", 1_000_136, "CG2", "failed", 4, "", "FAILED"),
    ]


def test_settings() -> None:
    assert trace_settings(True) == TraceSettings() and trace_settings(False) is None
    custom = TraceSettings(topic="MyTrace", buffer_max_records=5)
    assert trace_settings(custom) is custom and TraceSettings().topic == TRACE_TOPIC
    for bad in ({"topic": "no spaces"}, {"buffer_max_records": 0}, {"message_max_bytes": 10}):
        with pytest.raises(ClientConfigError):
            TraceSettings(**bad)  # type: ignore[arg-type]
    with pytest.raises(ClientConfigError):
        trace_settings("yes")  # type: ignore[arg-type]


@dataclass
class Collected:
    """Stands in for the dispatcher: what the hook records (the dispatcher itself is
    exercised against real brokers in tests/integration/test_trace.py)."""

    settings: TraceSettings = field(default_factory=TraceSettings)
    client_host: str = "10.0.0.9"
    records: list[TraceRecord] = field(default_factory=list)

    def record(self, record: TraceRecord) -> bool:
        self.records.append(record)
        return True


def consume_tracer() -> tuple[ConsumeTracer, Collected]:
    tracer = ConsumeTracer("CG", TraceSettings(), ClientConfig("127.0.0.1:9876"))
    collected = Collected()
    tracer.dispatcher = collected  # type: ignore[assignment]
    return tracer, collected


def msg(uniq: str, topic: str = "T", **props: str) -> StoredMessage:
    return StoredMessage(topic, b"x", {"UNIQ_KEY": uniq, "KEYS": "k " + uniq, **props}, reconsume_times=2)


@pytest.mark.parametrize(("answer", "success", "code"), [
    (ConsumeStatus.CONSUME_SUCCESS, True, ConsumeReturnType.SUCCESS),
    (ConsumeOrderlyStatus.SUCCESS, True, ConsumeReturnType.SUCCESS),
    (ConsumeStatus.RECONSUME_LATER, False, ConsumeReturnType.FAILED),
    (None, False, ConsumeReturnType.RETURNNULL),
])
def test_a_listener_call_is_traced_per_message(answer: Any, success: bool, code: ConsumeReturnType) -> None:
    tracer, collected = consume_tracer()
    batch = [msg("A"), msg("B"), msg("C", TRACE_ON="false"), msg("D", topic=TRACE_TOPIC)]
    assert tracer.wrap(lambda msgs, ctx: answer)(batch, None) is answer
    before = [r for r in collected.records if isinstance(r, SubBeforeTrace)]
    after = [r for r in collected.records if isinstance(r, SubAfterTrace)]
    assert [(r.msg_id, r.reconsume_times, r.keys, r.group, r.client_host) for r in before] == [
        ("A", 2, "k A", "CG", "10.0.0.9"), ("B", 2, "k B", "CG", "10.0.0.9")]
    assert [(r.msg_id, r.success, r.context_code) for r in after] == [("A", success, code), ("B", success, code)]
    assert {r.request_id for r in before} == {r.request_id for r in after} and len({r.request_id for r in after}) == 1


def test_an_async_listener_that_raises_is_traced_as_an_exception() -> None:
    tracer, collected = consume_tracer()

    async def listener(msgs: list[StoredMessage], ctx: Any) -> ConsumeStatus:
        raise RuntimeError("boom")

    wrapped = tracer.wrap(listener)
    assert asyncio.iscoroutinefunction(wrapped)
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(wrapped([msg("A")], None))
    (after,) = [r for r in collected.records if isinstance(r, SubAfterTrace)]
    assert (after.success, after.context_code) == (False, ConsumeReturnType.EXCEPTION)


def test_without_tracing_the_listener_is_left_alone() -> None:
    tracer = ConsumeTracer("CG", None, ClientConfig("127.0.0.1:9876"))

    def listener(msgs: list[StoredMessage], ctx: Any) -> ConsumeStatus:
        return ConsumeStatus.CONSUME_SUCCESS

    assert tracer.wrap(listener) is listener and tracer.stats() is None
    tracer.polled([msg("A")])
