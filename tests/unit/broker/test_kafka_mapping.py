"""A Kafka record stored as a RocketMQ message reads back as the same record: text and
binary keys, null values (tombstones), text, binary and null header values; and a RocketMQ
message reads as a record with its KEYS as the key and its tag and user properties as headers."""

from __future__ import annotations

import pytest

from skiff.broker.kafka.mapping import message_record, record_properties
from skiff.common.properties import decode_properties, encode_properties
from skiff.common.stored_message import StoredMessage
from skiff.protocol.kafka.records import Record


@pytest.mark.parametrize("record", [
    Record(0, 1_700_000_000_123, b"order-1", b"{}", (("source", b"web"), ("trace", b"\x00\xff"), ("none", None))),
    Record(0, 5, bytes([0xFF, 0x00]), None),
    Record(0, 5, None, b"no key", (("with space", "é ✓".encode()),)),
    Record(0, 5, b"a b", b"", (("KAFKA_X", b"reserved prefix"),)),
])
def test_a_record_reads_back_as_sent(record: Record) -> None:
    props = record_properties(record)
    stored = StoredMessage("t", record.value or b"", decode_properties(encode_properties(props)),
                           born_timestamp=record.timestamp)
    assert message_record(stored, 0) == record


def test_keys_name_every_key_for_compaction_and_the_index() -> None:
    assert record_properties(Record(0, 0, b"k1", b"v"))["KEYS"] == "k1"
    assert record_properties(Record(0, 0, bytes([0xFF]), b"v"))["KEYS"] == "base64:/w=="


def test_a_rocketmq_message_reads_as_a_record() -> None:
    msg = StoredMessage("t", b"body", {"KEYS": "k-1 k-2", "TAGS": "TagA", "color": "blue", "UNIQ_KEY": "ABC",
                                        "WAIT": "true"}, born_timestamp=42)
    assert message_record(msg, 3) == Record(3, 42, b"k-1 k-2", b"body", (("TAGS", b"TagA"), ("color", b"blue")))


def test_a_kafka_property_that_is_not_base64_reads_as_its_text() -> None:
    # a RocketMQ producer may set KAFKA_KEY itself; non-ASCII text made base64 raise ValueError
    msg = StoredMessage("t", b"body", {"KAFKA_KEY": "ключ", "KAFKA_HB64.h": "not base64 ✓"}, born_timestamp=1)
    assert message_record(msg, 0) == Record(0, 1, "ключ".encode(), b"body", (("h", "not base64 ✓".encode()),))
