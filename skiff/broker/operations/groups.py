"""Subscription groups: create or update one, delete one, the table of all, and the group a
client names made on first sight, for remoting's UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
DELETE_SUBSCRIPTIONGROUP, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, a consumer's heartbeat, and
Kafka's JoinGroup and OffsetCommit (so a Kafka group is listed as RocketMQ's are).

A change is persisted by the group manager (and copied by slaves from the table); a
group's name and settings are checked here, so every door refuses alike.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from skiff.broker.groups import SubscriptionGroupManager, settings_error
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations.refusal import Refusal
from skiff.common.names import group_error
from skiff.protocol.bodies.admin import SubscriptionGroupConfig, SubscriptionGroupWrapper
from skiff.protocol.bodies.base import BodyError
from skiff.protocol.bodies.group_attributes import apply_patch
from skiff.protocol.codes import ResponseCode


@dataclass(frozen=True, slots=True)
class GroupDeletion:
    """A group to delete; ``remove_offsets``: its committed offsets go too."""

    group: str
    remove_offsets: bool = False


class GroupsOperation:
    def __init__(self, groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager) -> None:
        self.groups = groups
        self.offsets = offsets

    def put(self, group: SubscriptionGroupConfig) -> SubscriptionGroupConfig | Refusal:
        """Create the group or replace its settings, unless its name or settings are unusable.
        Its ``attributes`` are a patch on the group's current ones (skiff.protocol.bodies.group_attributes)."""
        why = group_error(group.group_name) or settings_error(group)
        if why is not None:
            return Refusal(ResponseCode.SYSTEM_ERROR, why, bad_request=True)
        current = self.groups.get(group.group_name)
        try:
            attributes = apply_patch(current.attributes if current is not None else {}, group.attributes)
        except BodyError as exc:
            return Refusal(ResponseCode.SYSTEM_ERROR, str(exc), bad_request=True)
        final = dataclasses.replace(group, attributes=attributes)
        self.groups.put(final)
        return final

    def delete(self, deletion: GroupDeletion) -> None:
        """The group goes (deleting one that is not here is no error, as RocketMQ's)."""
        self.groups.delete(deletion.group)
        if deletion.remove_offsets:
            self.offsets.remove_group(deletion.group)

    def table(self) -> SubscriptionGroupWrapper:
        """Every group's settings, with the table's data version (what slaves copy)."""
        return self.groups.wrapper()

    def ensure(self, group: str) -> SubscriptionGroupConfig | None:
        """The group a client names: its settings, made with the defaults when
        ``autoCreateSubscriptionGroup``; None when it is not here and may not be made."""
        return self.groups.find_or_create(group)
