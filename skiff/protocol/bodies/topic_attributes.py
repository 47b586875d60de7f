"""Topic attributes, RocketMQ 5's way: a map of name -> value kept in the TopicConfig
(``"attributes":{"cleanup.policy":"COMPACTION"}`` in topics.json), changed through the
CREATE_TOPIC header's ``attributes`` field as ``+name=value`` (set) and ``-name``
(reset to the default), comma-separated (RocketMQ's AttributeParser).

Skiff knows ``cleanup.policy`` (DELETE or COMPACTION; RocketMQ 5.1's name),
``delete.retention.ms`` (how long a tombstone of a compacted topic stays, Kafka's
name), and the tier's ``tiered.storage``, ``retention.local.ms`` and
``retention.tiered.ms`` (docs/tiered-storage.md), and RocketMQ 5's ``message.type`` (what 5.x
producers may send to the topic: NORMAL, FIFO, DELAY, TRANSACTION, PRIORITY, LITE, or MIXED for the
first four), ``lite.topic.expiration`` (a LITE parent's idle lite topics' lifetime in minutes), and
``dedup.window.ms`` (a message whose UNIQ_KEY the topic stored within that many
milliseconds is not stored again: skiff/broker/dedup.py; 0, the default, is off). RocketMQ marks
cleanup.policy unchangeable after creation; Skiff lets an update switch it, since compaction
only ever reads a topic's existing records. Any other name is refused, as RocketMQ refuses unsupported keys.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from skiff.protocol.bodies.attribute_changes import parse_changes
from skiff.protocol.bodies.base import BodyError

CLEANUP_POLICY = "cleanup.policy"
DELETE_RETENTION_MS = "delete.retention.ms"
DEFAULT_DELETE_RETENTION_MS = 86_400_000
"""A day, Kafka's default: a consumer that reads the topic within a day sees every delete."""


class CleanupPolicy(enum.StrEnum):
    DELETE = "DELETE"
    """Records go when their CommitLog file expires (fileReservedTime)."""
    COMPACTION = "COMPACTION"
    """Only the latest record of each KEYS value is kept (docs/compaction.md)."""


def _check_policy(value: str) -> str:
    try:
        return CleanupPolicy(value.upper()).value
    except ValueError:
        raise BodyError(f"{CLEANUP_POLICY}={value!r}: must be DELETE or COMPACTION") from None


def _check_retention(value: str) -> str:
    if not value.strip().isdigit():
        raise BodyError(f"{DELETE_RETENTION_MS}={value!r}: must be a whole number of milliseconds (0 or more)")
    return str(int(value))


TIERED_STORAGE = "tiered.storage"
"""true: sealed messages of the topic are uploaded to the broker's tier (docs/tiered-storage.md)."""
RETENTION_LOCAL_MS = "retention.local.ms"
"""A tiered topic's messages stay local at least this long after their store time, uploaded or not."""
RETENTION_TIERED_MS = "retention.tiered.ms"
"""How long a tiered topic's files stay in the tier (-1: forever)."""
DEFAULT_RETENTION_LOCAL_MS = 0
DEFAULT_RETENTION_TIERED_MS = -1


def _check_bool(value: str) -> str:
    if value.strip().lower() not in ("true", "false"):
        raise BodyError(f"{TIERED_STORAGE}={value!r}: must be true or false")
    return value.strip().lower()


def _check_ms(name: str, allow_forever: bool) -> Callable[[str], str]:
    def check(value: str) -> str:
        text = value.strip()
        if not (text.isdigit() or (allow_forever and text == "-1")):
            raise BodyError(f"{name}={value!r}: must be a whole number of milliseconds (0 or more"
                            f"{', or -1 for forever' if allow_forever else ''})")
        return str(int(text))
    return check


DEDUP_WINDOW_MS = "dedup.window.ms"
"""A send whose UNIQ_KEY the topic stored within this many ms is answered with the original, not
stored (skiff/broker/dedup.py); 0 (the default): every send is stored."""


def dedup_window_ms(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(DEDUP_WINDOW_MS, 0))


MESSAGE_TYPE = "message.type"


class TopicMessageType(enum.StrEnum):
    """What a topic takes from 5.x producers (RocketMQ's TopicMessageType, with 5.4's PRIORITY)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    PRIORITY = "PRIORITY"
    """Queue n holds priority n (the highest queue the highest and above); POP reads higher queues first."""
    MIXED = "MIXED"
    """NORMAL, FIFO, DELAY and TRANSACTION (not PRIORITY, as RocketMQ's)."""
    LITE = "LITE"
    """A parent of lite topics (RocketMQ 5.5, RIP-83): takes only LITE messages (docs/grpc.md: lite topics)."""


def _check_message_type(value: str) -> str:
    try:
        return TopicMessageType(value.strip().upper()).value
    except ValueError:
        raise BodyError(f"{MESSAGE_TYPE}={value!r}: must be one of {', '.join(TopicMessageType)}") from None


def message_type(attributes: Mapping[str, str]) -> TopicMessageType | None:
    """The topic's message.type; None when it has none (a Skiff topic then takes every type
    but PRIORITY; RocketMQ reads the absence as NORMAL)."""
    value = attributes.get(MESSAGE_TYPE)
    return None if value is None else TopicMessageType(value)


LITE_TOPIC_EXPIRATION = "lite.topic.expiration"
"""A LITE parent's lite topics are deleted after this many minutes without a message (RocketMQ 5.5;
-1, the default: never; at most 43,200, 30 days; skiff.broker.grpc.lite_expiry)."""
LITE_TOPIC_EXPIRATION_MAX_MIN = 43_200


def _check_lite_expiration(value: str) -> str:
    text = value.strip()
    if not (text.lstrip("-").isdigit() and -1 <= int(text) <= LITE_TOPIC_EXPIRATION_MAX_MIN):
        raise BodyError(f"{LITE_TOPIC_EXPIRATION}={value!r}: must be minutes from -1 (never) to "
                        f"{LITE_TOPIC_EXPIRATION_MAX_MIN}")
    return str(int(text))


def lite_topic_expiration_min(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(LITE_TOPIC_EXPIRATION, -1))


_KNOWN = {MESSAGE_TYPE: _check_message_type, LITE_TOPIC_EXPIRATION: _check_lite_expiration, CLEANUP_POLICY: _check_policy, DELETE_RETENTION_MS: _check_retention,
          TIERED_STORAGE: _check_bool,
          RETENTION_LOCAL_MS: _check_ms(RETENTION_LOCAL_MS, False),
          RETENTION_TIERED_MS: _check_ms(RETENTION_TIERED_MS, True),
          DEDUP_WINDOW_MS: _check_ms(DEDUP_WINDOW_MS, False)}


def parse_attribute_changes(text: str) -> dict[str, str | None]:
    """``"+a=1,-b"`` -> ``{"a": "1", "b": None}`` (None: back to the default), values checked."""
    return parse_changes(text, "topic attribute", _checked)


def _checked(name: str, value: str | None) -> str | None:
    check = _KNOWN.get(name)
    if check is None:
        raise BodyError(f"unknown topic attribute {name!r} (known: {', '.join(sorted(_KNOWN))})")
    return None if value is None else check(value)


def apply_attribute_changes(current: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    out = dict(current)
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def changes_text(attributes: Mapping[str, str]) -> str:
    """The CREATE_TOPIC ``attributes`` field that sets ``attributes``."""
    return ",".join(f"+{name}={value}" for name, value in sorted(attributes.items()))


def cleanup_policy(attributes: Mapping[str, str]) -> CleanupPolicy:
    return CleanupPolicy(attributes.get(CLEANUP_POLICY, CleanupPolicy.DELETE.value))


def delete_retention_ms(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(DELETE_RETENTION_MS, DEFAULT_DELETE_RETENTION_MS))


def tiered_storage(attributes: Mapping[str, str]) -> bool:
    return attributes.get(TIERED_STORAGE, "false") == "true"


def retention_local_ms(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(RETENTION_LOCAL_MS, DEFAULT_RETENTION_LOCAL_MS))


def retention_tiered_ms(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(RETENTION_TIERED_MS, DEFAULT_RETENTION_TIERED_MS))
