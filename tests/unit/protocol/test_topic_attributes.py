"""Topic attribute changes as RocketMQ 5 sends them in CREATE_TOPIC (``+name=value,-name``)."""

import pytest

from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.topic import TopicConfig
from skiff.protocol.bodies.topic_attributes import (
    CleanupPolicy,
    apply_attribute_changes,
    changes_text,
    cleanup_policy,
    delete_retention_ms,
    parse_attribute_changes,
)


def test_changes_parse_apply_and_round_trip():
    changes = parse_attribute_changes("+cleanup.policy=compaction, +delete.retention.ms=60000")
    assert changes == {"cleanup.policy": "COMPACTION", "delete.retention.ms": "60000"}
    attrs = apply_attribute_changes({}, changes)
    assert cleanup_policy(attrs) is CleanupPolicy.COMPACTION and delete_retention_ms(attrs) == 60_000
    assert parse_attribute_changes(changes_text(attrs)) == changes
    reset = apply_attribute_changes(attrs, parse_attribute_changes("-delete.retention.ms"))
    assert reset == {"cleanup.policy": "COMPACTION"} and delete_retention_ms(reset) == 86_400_000
    assert cleanup_policy({}) is CleanupPolicy.DELETE and parse_attribute_changes("") == {}


def test_topic_config_json_keeps_attributes():
    tc = TopicConfig("T", 2, 2, attributes={"cleanup.policy": "COMPACTION"})
    assert b'"attributes":{"cleanup.policy":"COMPACTION"}' in tc.to_json()
    assert TopicConfig.from_json(tc.to_json()) == tc
    assert TopicConfig.from_json(b'{"topicName":"T"}').attributes == {}


@pytest.mark.parametrize(("text", "reason"), [
    ("+cleanup.policy=KEEP", "must be DELETE or COMPACTION"),
    ("+delete.retention.ms=-1", "whole number"),
    ("+queue.type=BatchCQ", "unknown topic attribute"),
    ("cleanup.policy=COMPACTION", r"\+name=value"),
    ("-cleanup.policy=DELETE", r"-name to remove"),
    ("+cleanup.policy=DELETE,-cleanup.policy", "changed twice"),
])
def test_bad_changes_are_refused_with_the_reason(text, reason):
    with pytest.raises(BodyError, match=reason):
        parse_attribute_changes(text)
