"""Topic configuration as brokers keep and register it: TopicConfig and the
wrapper of a broker's whole topic table with its DataVersion.

TopicConfig JSON (a broker's ``config/topics.json`` and REGISTER_BROKER)::

    {"order": false, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
     "topicName": "T", "topicSysFlag": 0, "writeQueueNums": 4,
     "attributes": {"cleanup.policy": "COMPACTION"}}

Its compact form, used inside the compressed registration body, is the text
``"T 4 4 6 SINGLE_TAG"``: name, read and write queue counts, perm and filter
type separated by single spaces (RocketMQ 5 appends attributes; they are ignored).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from skiff.protocol.bodies.admin import DataVersion
from skiff.protocol.bodies.base import BodyError, JsonBody


class Perm(enum.IntFlag):
    """A topic's permission bits on a broker (RocketMQ's PermName)."""

    INHERIT = 0x1
    WRITE = 0x2
    READ = 0x4
    PRIORITY = 0x8


def perm_text(perm: int) -> str:
    """``perm`` as RocketMQ's tools print it: R, W and X (inherit), or '-'."""
    return "".join(c if perm & p else "-" for c, p in (("R", Perm.READ), ("W", Perm.WRITE), ("X", Perm.INHERIT)))


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


DEFAULT_QUEUE_NUMS = 16
"""RocketMQ's TopicConfig default for the read and write queue counts."""


@dataclass(frozen=True, slots=True)
class TopicConfig(JsonBody):
    """One topic on one broker: queue counts, permission and flags."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = Perm.READ | Perm.WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)
    """RocketMQ 5's topic attributes (`skiff.protocol.bodies.topic_attributes`)."""

    def to_compact(self) -> str:
        """The form of the compressed registration body; it carries no flags."""
        return (f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
                f"{int(self.perm)} {self.topic_filter_type.value}")

    @classmethod
    def from_compact(cls, text: str) -> TopicConfig:
        parts = text.split(" ")
        if len(parts) < 5:
            raise BodyError(f"compact topic config {text!r} does not have 5 space-separated fields")
        try:
            read, write, perm = (int(p) for p in parts[1:4])
            filter_type = TopicFilterType(parts[4])
        except ValueError:
            raise BodyError(f"compact topic config {text!r} has a bad count, perm or filter type") from None
        return cls(parts[0], read, write, perm, filter_type)


@dataclass(frozen=True, slots=True)
class TopicConfigSerializeWrapper(JsonBody):
    """A broker's topic table with the DataVersion that stamps it."""

    topic_config_table: Mapping[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = DataVersion()
