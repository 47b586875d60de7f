"""A consumer group's settings as the dashboard reads and changes them: the settings of
``mqadmin updateSubGroup`` (and RocketMQ 5's group attributes) from a request body, and the
group page's view of them.

One form serves create and update: the settings it gives change, the others stay (a group
that is not there starts from RocketMQ's defaults), as `AsyncAdmin.update_consumer_group`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skiff.client.errors import MessageValidationError
from skiff.dashboard.form import Form
from skiff.protocol.bodies.admin import GroupRetryPolicy, SubscriptionGroupConfig
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.group_attributes import parse_changes

JAVA_INT_MAX = 2**31 - 1
"""retryMaxTimes and retryQueueNums are Java ints in RocketMQ's SubscriptionGroupConfig."""

_FLAGS = {"orderly": "consume_message_orderly", "consume_enable": "consume_enable",
          "broadcast": "consume_broadcast_enable", "consume_from_min": "consume_from_min_enable"}
"""Form field -> the group setting it is (true or false)."""


def _flag(form: Form, name: str) -> bool:
    value = form.fields[name]
    if value in (True, "true"):
        return True
    if value in (False, "false"):
        return False
    raise MessageValidationError(f"{name} must be true or false, not {value!r}")


def _parsed(name: str, parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except BodyError as exc:
        raise MessageValidationError(f"{name}: {exc}") from None


def group_changes(form: Form) -> dict[str, Any]:
    """The settings a request gives, as `AsyncAdmin.update_consumer_group`'s keyword arguments:
    ``orderly``, ``consume_enable``, ``broadcast``, ``consume_from_min`` (true or false),
    ``retry_max_times``, ``retry_queue_nums``, ``retry_policy`` (mqadmin's JSON) and
    ``attributes`` (mqadmin's ``+a=b,-c``)."""
    changes: dict[str, Any] = {dest: _flag(form, name) for name, dest in _FLAGS.items() if form.given(name)}
    for name in ("retry_max_times", "retry_queue_nums"):
        if form.given(name):
            changes[name] = form.integer(name, low=0, high=JAVA_INT_MAX)
    if form.given("retry_policy"):
        changes["group_retry_policy"] = _parsed(
            "retry_policy", lambda t: GroupRetryPolicy.from_json(t.encode()), form.text("retry_policy"))
    if form.given("attributes"):
        changes["attributes"] = _parsed("attributes", parse_changes, form.text("attributes"))
    return changes


def group_settings(config: SubscriptionGroupConfig) -> dict[str, Any]:
    """What the group page shows of a group's settings."""
    return {"orderly": config.consume_message_orderly, "consume_enable": config.consume_enable,
            "broadcast": config.consume_broadcast_enable, "consume_from_min": config.consume_from_min_enable,
            "retry_max_times": config.retry_max_times, "retry_queue_nums": config.retry_queue_nums,
            "retry_policy": config.group_retry_policy.to_json().decode(),
            "attributes": dict(sorted(config.attributes.items()))}
