"""Validation of topic and group names, with RocketMQ's rules and a reason on failure."""

from __future__ import annotations

import re

from skiff.common.limits import GROUP_MAX_CHARS, TOPIC_MAX_CHARS

_VALID = re.compile(r"^[%|a-zA-Z0-9_-]+$")

TBW102 = "TBW102"
"""The template topic producers name when they send to a topic that does not exist."""
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRANS_GROUP = "CID_RMQ_SYS_TRANS"
SYSTEM_TOPICS = frozenset(
    {TBW102, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC}
)
"""Topics that clients may not send to directly (the trace topic is written by clients)."""


def topic_error(topic: str) -> str | None:
    """Why ``topic`` is not a valid topic name, or None when it is."""
    if not topic:
        return "the topic is empty"
    if len(topic) > TOPIC_MAX_CHARS:
        return f"the topic is {len(topic)} characters, more than the {TOPIC_MAX_CHARS} allowed"
    if not _VALID.match(topic):
        return f"the topic {topic!r} has characters other than letters, digits, '%', '|', '_' and '-'"
    return None


def group_error(group: str) -> str | None:
    """Why ``group`` is not a valid producer or consumer group name, or None."""
    if not group:
        return "the group name is empty"
    if len(group) > GROUP_MAX_CHARS:
        return f"the group name is {len(group)} characters, more than the {GROUP_MAX_CHARS} allowed"
    if not _VALID.match(group):
        return f"the group name {group!r} has characters other than letters, digits, '%', '|', '_' and '-'"
    return None


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def pop_retry_topic(group: str, topic: str) -> str:
    """Where POP consumption re-queues ``group``'s un-acknowledged messages of ``topic``
    (RocketMQ 5's first form, ``%RETRY%<group>_<topic>``)."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX)
