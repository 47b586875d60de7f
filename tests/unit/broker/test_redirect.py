"""Where delayed and half messages are parked, and what the writer hands the store."""

import pytest

from skiff.broker.redirect import DelayPolicy, Schedule
from skiff.broker.writer import MessageWriter
from skiff.common.clock import ManualClock
from skiff.common.names import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from skiff.common.properties import Prop, decode_properties, encode_properties

LEVELS = (1000, 5000, 10_000)
NOW = 1_700_000_000_000
POLICY = DelayPolicy(LEVELS, max_delay_ms=3_600_000)


@pytest.mark.parametrize(("props", "expected"), [
    ({}, None),
    ({Prop.DELAY: "0"}, None),
    ({Prop.DELAY: "-2"}, None),
    ({Prop.DELAY: "1"}, Schedule(0, NOW + 1000)),
    ({Prop.DELAY: "3"}, Schedule(2, NOW + 10_000)),
    ({Prop.DELAY: "99"}, Schedule(2, NOW + 10_000)),
    ({Prop.DELIVER_TIME_MS: str(NOW + 42)}, Schedule(3, NOW + 42)),
    ({Prop.TIMER_DELIVER_MS: str(NOW + 43)}, Schedule(3, NOW + 43)),
    ({Prop.DELAY_MS: "1500"}, Schedule(3, NOW + 1500)),
    ({Prop.TIMER_DELAY_MS: "1600"}, Schedule(3, NOW + 1600)),
    ({Prop.TIMER_DELAY_SEC: "7"}, Schedule(3, NOW + 7000)),
    ({Prop.DELIVER_TIME_MS: str(NOW - 5)}, None),
    ({Prop.DELAY: "2", Prop.DELAY_MS: "99999"}, Schedule(1, NOW + 5000)),
])
def test_schedule(props, expected):
    assert POLICY.schedule(props, NOW) == expected


@pytest.mark.parametrize(("props", "words"), [
    ({Prop.DELAY: "soon"}, "the DELAY property 'soon' is not a delay level (1 to 3)"),
    ({Prop.DELAY_MS: "1.5"}, "the DELAY_MS property '1.5' is not a whole number"),
    ({Prop.DELIVER_TIME_MS: str(NOW + 3_600_001)}, "due in 3600 s, more than timerMaxDelaySec=3600"),
])
def test_refusals_say_why(props, words):
    refusal = POLICY.schedule(props, NOW)
    assert isinstance(refusal, str) and words in refusal


def _write(props, sys_flag=0, **kw):
    writer = MessageWriter(POLICY, ManualClock(NOW), **kw)
    return writer.message("Orders", 3, b"body", props, None, 7, sys_flag, NOW - 1, b"\x7f\0\0\1\0\0\x30\x39")


def test_plain_message_keeps_topic_and_indexes_tags_keys_and_id():
    raw = encode_properties({Prop.TAGS: "A", Prop.KEYS: "k1 k2", Prop.UNIQ_KEY: "U1"})
    writer = MessageWriter(POLICY, ManualClock(NOW))
    m = writer.message("Orders", 3, b"body", decode_properties(raw), raw, 7, 0, NOW - 1, b"h" * 8)
    assert (m.topic, m.queue_id, m.properties, m.tags, m.keys, m.uniq_key, m.flag) == (
        "Orders", 3, raw, "A", "k1 k2", "U1", 7)


def test_delayed_message_is_parked_with_its_target_and_due_time():
    m = _write({Prop.DELAY: "2", Prop.TAGS: "A"})
    assert (m.topic, m.queue_id, m.tags) == (SCHEDULE_TOPIC, 1, "A")
    props = decode_properties(m.properties)
    assert (props[Prop.REAL_TOPIC], props[Prop.REAL_QID], props[Prop.TIMER_OUT_MS]) == ("Orders", "3", str(NOW + 5000))


def test_delivery_time_goes_to_the_any_time_queue():
    m = _write({Prop.DELIVER_TIME_MS: str(NOW + 60_000)})
    assert (m.topic, m.queue_id) == (SCHEDULE_TOPIC, POLICY.any_time_queue) == (SCHEDULE_TOPIC, 3)
    assert decode_properties(m.properties)[Prop.TIMER_OUT_MS] == str(NOW + 60_000)


def test_half_message_is_parked_in_the_half_topic_as_not_type():
    m = _write({Prop.TRAN_MSG: "true", Prop.PGROUP: "PG", Prop.DELAY: "1"}, sys_flag=0x4 | 0x1)
    assert (m.topic, m.queue_id, m.sys_flag) == (TRANS_HALF_TOPIC, 0, 0x1)
    props = decode_properties(m.properties)
    assert (props[Prop.REAL_TOPIC], props[Prop.REAL_QID], props[Prop.PGROUP]) == ("Orders", "3", "PG")


def test_half_messages_can_be_refused():
    assert "rejectTransactionMessage" in _write({Prop.TRAN_MSG: "true"}, reject_transactions=True)


def test_rolled_back_or_prepared_types_are_never_delayed():
    assert _write({Prop.DELAY: "1"}, sys_flag=0xC).topic == "Orders"


def test_a_sent_timer_id_is_dropped_from_single_messages_and_batches():
    """TIMER_ID marks the timer's deliveries; a restarted timer trusts the marks it finds in
    the CommitLog, so one a client sent (forged, or forwarded from a delivered message)
    would make it skip a scheduled message. The writer drops it, and keeps the rest."""
    from skiff.protocol.message_codec import BatchColumns

    forged = {Prop.TAGS: "A", Prop.TIMER_ID: "3600000_4096", Prop.UNIQ_KEY: "U1"}
    raw = encode_properties(forged)
    writer = MessageWriter(POLICY, ManualClock(NOW))
    single = writer.message("Orders", 3, b"body", decode_properties(raw), raw, 7, 0, NOW - 1, b"h" * 8)
    assert decode_properties(single.properties) == {Prop.TAGS: "A", Prop.UNIQ_KEY: "U1"}
    assert (single.tags, single.uniq_key) == ("A", "U1")

    clean = encode_properties({Prop.TAGS: "B", Prop.UNIQ_KEY: "U2"})
    for raws in ([raw, raw], [clean, raw]):  # one name layout (columns), and mixed layouts
        stored = writer.batch("Orders", 3, BatchColumns([0, 0], [b"a", b"b"], raws), 0, NOW - 1, b"h" * 8)
        assert all(Prop.TIMER_ID not in decode_properties(m.properties) for m in stored)
        assert [m.uniq_key for m in stored] == [decode_properties(r)[Prop.UNIQ_KEY] for r in raws]
    untouched = writer.batch("Orders", 3, BatchColumns([0], [b"c"], [clean]), 0, NOW - 1, b"h" * 8)
    assert untouched[0].properties is clean
