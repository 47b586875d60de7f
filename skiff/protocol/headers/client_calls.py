"""Headers of the requests a broker sends to clients (and two admin requests that share them).

| code | request                          | header                                  |
|------|----------------------------------|-----------------------------------------|
| 40   | NOTIFY_CONSUMER_IDS_CHANGED      | `NotifyConsumerIdsChangedRequestHeader` |
| 220  | RESET_CONSUMER_CLIENT_OFFSET     | `ResetOffsetRequestHeader`              |
| 221  | GET_CONSUMER_STATUS_FROM_CLIENT  | `GetConsumerStatusRequestHeader`        |
| 307  | GET_CONSUMER_RUNNING_INFO        | `GetConsumerRunningInfoRequestHeader`   |
| 222  | INVOKE_BROKER_TO_RESET_OFFSET (admin to broker) | `ResetOffsetRequestHeader` |

GET_CONSUMER_RUNNING_INFO also goes admin to broker, which forwards it to the client.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.protocol.headers.base import Header


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str


@dataclass(frozen=True, slots=True)
class ResetOffsetRequestHeader(Header):
    """Reset ``group``'s offsets on ``topic`` to the first message stored at ``timestamp`` (ms).

    Java's field is named ``isForce``, and so is the wire key.
    """

    topic: str
    group: str
    timestamp: int
    is_force: bool


@dataclass(frozen=True, slots=True)
class GetConsumerStatusRequestHeader(Header):
    topic: str
    group: str
    client_addr: str | None = None


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool = False
