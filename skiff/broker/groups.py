"""SubscriptionGroupManager: consumer groups' settings on this broker.

A group is created by an admin request, or on first use when
``autoCreateSubscriptionGroup`` is on (RocketMQ's default), with RocketMQ's
defaults (one retry queue, ``retryMaxTimes`` = the broker's
``maxReconsumeTimes``). Changes go to ``config/subscriptionGroup.json`` at once.
"""

from __future__ import annotations

from collections.abc import Sequence

from skiff.broker.config import BrokerConfig
from skiff.broker.persist import VersionedTable
from skiff.common.clock import Clock
from skiff.protocol.bodies.admin import (
    ExponentialRetryPolicy,
    GroupRetryPolicy,
    RetryPolicyType,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)

FILE_NAME = "subscriptionGroup.json"


class SubscriptionGroupManager(VersionedTable):
    def __init__(self, config: BrokerConfig, store_root: str, clock: Clock) -> None:
        super().__init__(store_root, FILE_NAME, clock)
        self.config = config
        self._table: dict[str, SubscriptionGroupConfig] = {}

    def load(self) -> None:
        raw = self.file.load()
        if raw is not None:
            wrapper = SubscriptionGroupWrapper.from_obj(raw, FILE_NAME)
            self._table.update(wrapper.subscription_group_table)
            self.data_version = wrapper.data_version

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with the defaults when auto-creation is on; else None."""
        found = self._table.get(group)
        if found is not None or not self.config.auto_create_subscription_group:
            return found
        created = SubscriptionGroupConfig(group, retry_max_times=self.config.max_reconsume_times)
        self.put(created)
        return created

    def retry_max_times(self, group: str) -> int:
        """How often the group's messages are redelivered before the DLQ: its config's, else the
        broker's maxReconsumeTimes (a group that cannot be auto-created)."""
        found = self.find_or_create(group)
        return self.config.max_reconsume_times if found is None else found.retry_max_times

    def put(self, group_config: SubscriptionGroupConfig) -> None:
        if self._table.get(group_config.group_name) == group_config:
            return
        self._table[group_config.group_name] = group_config
        self.changed(f"subscription group {group_config.group_name} set")

    def delete(self, group: str) -> bool:
        if self._table.pop(group, None) is None:
            return False
        self.changed(f"subscription group {group} deleted")
        return True

    def groups(self) -> list[str]:
        return sorted(self._table)

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(dict(self._table), self.data_version)

    def document(self) -> bytes:
        return self.wrapper().to_json()


def settings_error(group: SubscriptionGroupConfig) -> str | None:
    """What makes a group's settings unusable, or None."""
    if group.retry_queue_nums < 0 or group.retry_max_times < 0:
        return "retryQueueNums and retryMaxTimes must not be negative"
    policy = group.group_retry_policy
    exp = policy.exponential_retry_policy
    if exp is not None and not 0 < exp.initial <= exp.max or exp is not None and exp.multiplier < 1:
        return (f"an exponential retry policy needs 0 < initial <= max and multiplier >= 1, not initial "
                f"{exp.initial}, max {exp.max}, multiplier {exp.multiplier}")
    custom = policy.customized_retry_policy
    if custom is not None and any(ms <= 0 for ms in custom.next):
        return f"a customized retry policy's delays must be positive ms: {list(custom.next)}"
    return None


def backoff_ms(policy: GroupRetryPolicy, delay_levels_ms: Sequence[int]) -> ExponentialRetryPolicy | list[int]:
    """The backoff a group's 5.x consumers retry with: an exponential policy, or each retry's
    delay (CUSTOMIZED without a list: the broker's delay levels, as the proxy's default)."""
    if policy.type is RetryPolicyType.EXPONENTIAL:
        return policy.exponential_retry_policy or ExponentialRetryPolicy()
    custom = policy.customized_retry_policy
    return list(custom.next) if custom is not None and custom.next else list(delay_levels_ms)
