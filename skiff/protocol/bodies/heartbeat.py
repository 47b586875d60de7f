"""HEART_BEAT (34) body: a client's producer groups, consumer groups and subscriptions.

The C++ client writes enums as integers (Java's ordinals) and leaves out empty
sets; Java's client writes enum names and every field. Both read here; Skiff
writes ordinals and every set.

    {"clientID":"<pid>-<ip>@DEFAULT",
     "consumerDataSet":[{"groupName":"G","consumeType":1,"messageModel":1,"consumeFromWhere":0,
        "subscriptionDataSet":[{"topic":"T","subString":"TagA || TagB","subVersion":"1574400000000",
                                "tagsSet":["TagA","TagB"],"codeSet":[0,0]}]}],
     "producerDataSet":[{"groupName":"PG"}]}
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skiff.protocol.bodies.base import JsonBody

SUB_ALL = "*"
"""The subscription expression that matches every message."""


class ConsumeType(enum.IntEnum):
    CONSUME_ACTIVELY = 0
    """Pull consumer."""
    CONSUME_PASSIVELY = 1
    """Push consumer."""


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    """Where a consumer group with no stored offset starts (ordinals 1-3 are deprecated in Java)."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class ExpressionType(enum.StrEnum):
    """Java's ExpressionType holds string constants, and they travel as strings."""

    TAG = "TAG"
    SQL92 = "SQL92"


@dataclass(frozen=True, slots=True)
class SubscriptionData(JsonBody):
    """One topic a consumer group subscribes to.

    ``codeSet`` from the C++ client holds ``atoi(tag)``, not tag hashes: brokers
    rebuild tag codes from ``subString``.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: tuple[str, ...] = ()
    code_set: tuple[int, ...] = ()
    sub_version: int = 0
    expression_type: ExpressionType = ExpressionType.TAG
    class_filter_mode: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerData(JsonBody):
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: tuple[SubscriptionData, ...] = ()
    unit_mode: bool = False


@dataclass(frozen=True, slots=True)
class ProducerData(JsonBody):
    group_name: str


@dataclass(frozen=True, slots=True)
class HeartbeatData(JsonBody):
    WIRE_NAMES = {"client_id": "clientID"}

    client_id: str
    producer_data_set: tuple[ProducerData, ...] = ()
    consumer_data_set: tuple[ConsumerData, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckClientRequestBody(JsonBody):
    """CHECK_CLIENT_CONFIG (46) body: a consumer asks, before it starts, whether a broker
    serves one of its subscriptions (Java's client sends it for every non-TAG one)."""

    client_id: str
    group: str
    subscription_data: SubscriptionData
