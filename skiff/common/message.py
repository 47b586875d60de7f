"""The message a producer sends and the queue it lands in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from skiff.common.properties import KEY_SEPARATOR, Prop, split_keys


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker group: the unit of ordering and of rebalance."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send: topic, body, flag and properties (tags and keys included).

    Tags, keys, delays and user properties are all properties on the wire, so
    they are kept in one mapping; `Message.of` builds one from friendly arguments.
    """

    topic: str
    body: bytes
    properties: Mapping[str, str] = field(default_factory=dict)
    flag: int = 0

    @classmethod
    def of(
        cls,
        topic: str,
        body: bytes | str,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        delay_ms: int | None = None,
        sharding_key: str | None = None,
        priority: int | None = None,
    ) -> Message:
        """``sharding_key``: the FIFO message group (5.x clients' name). ``priority`` (0 and up,
        RocketMQ 5.4): on a topic with ``message.type=PRIORITY`` the broker stores the message in
        queue min(priority, queues - 1), and POP consumers get higher priorities first; it
        cannot go with a message group or a delay, as the 5.x clients refuse too."""
        props: dict[str, str] = {k: str(v) for k, v in (properties or {}).items()}
        if priority is not None:
            if priority < 0:
                raise ValueError(f"a message's priority is 0 or more, not {priority}")
            if sharding_key is not None or delay_level or deliver_time_ms is not None or delay_ms is not None:
                raise ValueError("a message's priority cannot go with a message group (sharding_key) or a delay")
            props[Prop.PRIORITY] = str(priority)
        if tags:
            props[Prop.TAGS] = tags
        if keys:
            props[Prop.KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        if delay_level:
            props[Prop.DELAY] = str(delay_level)
        if deliver_time_ms is not None:
            props[Prop.DELIVER_TIME_MS] = str(deliver_time_ms)
        if delay_ms is not None:
            props[Prop.DELAY_MS] = str(delay_ms)
        if sharding_key is not None:
            props[Prop.SHARDING_KEY] = sharding_key
        return cls(topic, body.encode() if isinstance(body, str) else bytes(body), props, flag)

    @property
    def tags(self) -> str | None:
        return self.properties.get(Prop.TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(Prop.KEYS))

    @property
    def priority(self) -> int | None:
        value = self.properties.get(Prop.PRIORITY)
        return int(value) if value is not None and value.isdigit() else None

    @property
    def message_group(self) -> str | None:
        """The FIFO message group (the sharding key)."""
        return self.properties.get(Prop.SHARDING_KEY)

    @property
    def delay_level(self) -> int:
        return int(self.properties.get(Prop.DELAY, "0") or 0)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(Prop.UNIQ_KEY)

    def with_properties(self, **extra: str) -> Message:
        return replace(self, properties={**self.properties, **extra})

    def with_topic(self, topic: str) -> Message:
        return replace(self, topic=topic)
