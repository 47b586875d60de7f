"""Consumer group attributes, RocketMQ 5's way: a map of name -> value kept in the
SubscriptionGroupConfig (``"attributes":{"lite.bind.topic":"Orders"}`` in subscriptionGroup.json).

An UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body carries a *patch*, not the map: ``"+name": value``
sets a name, ``"-name": ""`` removes it, and the broker applies the patch to the group's current
attributes (RocketMQ 5's ``SubscriptionGroupManager`` with ``AttributeUtil.alterCurrentAttributes``),
so a settings change that names no attribute keeps them all. ``mqadmin updateSubGroup
--attributes`` writes the patch as ``+a=b,+c=d,-e``. Skiff also takes a name without a sign as a
set (its own earlier form). A name RocketMQ 5.5 does not define is refused, as RocketMQ refuses
unsupported keys.

The names are 5.5's lite-topic ones (RIP-83; skiff/broker/grpc/lite.py reads them):
``lite.bind.topic`` (the one parent topic the group's lite consumers subscribe under),
``lite.sub.client.quota`` (lite topics per client, -1 none; the clients' Settings carry it),
``lite.sub.wildcard`` (true: the group subscribes every lite topic of its parent, 5.5's
apache/rocketmq#10203), ``lite.sub.model`` (Shared or Exclusive),
``lite.sub.reset.offset.exclusive`` and ``lite.sub.reset.offset.unsubscribe`` (true or false),
``lite.sub.client.max.event.cnt`` (10 or more). Skiff acts on all (skiff.broker.grpc.lite; the
last as a bound on the lite topics one client holds batches of, docs/grpc.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from skiff.protocol.bodies import attribute_changes
from skiff.protocol.bodies.base import BodyError

BIND_TOPIC = "lite.bind.topic"
CLIENT_QUOTA = "lite.sub.client.quota"
WILDCARD = "lite.sub.wildcard"
SUB_MODEL = "lite.sub.model"
RESET_OFFSET_EXCLUSIVE = "lite.sub.reset.offset.exclusive"
RESET_OFFSET_UNSUBSCRIBE = "lite.sub.reset.offset.unsubscribe"
MAX_EVENT_COUNT = "lite.sub.client.max.event.cnt"


def _topic(name: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not value.strip():
            raise BodyError(f"{name} needs a topic name")
        return value.strip()
    return check


def _whole(name: str, low: int) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            number = int(value.strip())
        except ValueError:
            raise BodyError(f"{name}={value!r}: must be a whole number") from None
        if number < low:
            raise BodyError(f"{name}={value!r}: must be {low} or more")
        return str(number)
    return check


def _bool(name: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value.strip().lower() not in ("true", "false"):
            raise BodyError(f"{name}={value!r}: must be true or false")
        return value.strip().lower()
    return check


def _model(value: str) -> str:
    for model in ("Shared", "Exclusive"):
        if value.strip().lower() == model.lower():
            return model
    raise BodyError(f"{SUB_MODEL}={value!r}: must be Shared or Exclusive")


_KNOWN: dict[str, Callable[[str], str]] = {
    BIND_TOPIC: _topic(BIND_TOPIC), CLIENT_QUOTA: _whole(CLIENT_QUOTA, -1), WILDCARD: _bool(WILDCARD),
    SUB_MODEL: _model, RESET_OFFSET_EXCLUSIVE: _bool(RESET_OFFSET_EXCLUSIVE),
    RESET_OFFSET_UNSUBSCRIBE: _bool(RESET_OFFSET_UNSUBSCRIBE), MAX_EVENT_COUNT: _whole(MAX_EVENT_COUNT, 10),
}


def _known(name: str) -> Callable[[str], str]:
    check = _KNOWN.get(name)
    if check is None:
        raise BodyError(f"unknown consumer group attribute {name!r} (known: {', '.join(sorted(_KNOWN))})")
    return check


def checked(name: str, value: str) -> str:
    """``value`` of group attribute ``name`` in its kept form; BodyError for an unknown name or a bad value."""
    return _known(name)(value)


def parse_changes(text: str) -> dict[str, str | None]:
    """``"+a=1,-b"`` (mqadmin's form) -> ``{"a": "1", "b": None}`` (None: remove), values checked."""
    return attribute_changes.parse_changes(text, "group attribute", _checked_change)


def _checked_change(name: str, value: str | None) -> str | None:
    if value is None:
        _known(name)
        return None
    return checked(name, value)


def patch(changes: Mapping[str, str | None]) -> dict[str, str]:
    """The body's ``attributes`` that makes ``changes`` (None removes), as RocketMQ 5's admin sends it."""
    body: dict[str, str] = {}
    for name, value in changes.items():
        if value is None:
            _known(name)
            body["-" + name] = ""
        else:
            body["+" + name] = checked(name, value)
    return body


def apply_patch(current: Mapping[str, str], body: Mapping[str, str]) -> dict[str, str]:
    """The attributes after a body's patch (BodyError names what is wrong). Names kept with a
    leading ``+`` by Skiff before it applied patches are read as set."""
    out = {name.removeprefix("+"): value for name, value in current.items()}
    for key, value in body.items():
        if key.startswith("-"):
            _known(key[1:])
            out.pop(key[1:], None)
        else:
            name = key.removeprefix("+")
            out[name] = checked(name, value)
    return out
