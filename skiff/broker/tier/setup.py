"""The server's hooks into the tier, importable without pyarrow (the ``tier`` extra): a broker
with no ``tierStorageUrl`` never loads the tier's modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from skiff.broker.config import BrokerConfig
from skiff.broker.operations import Operations
from skiff.broker.topics import TopicConfigManager
from skiff.common.clock import Clock
from skiff.common.errors import ConfigError
from skiff.common.service import Periodic
from skiff.store import MessageStore
from skiff.transport.connection import Handler

if TYPE_CHECKING:
    from skiff.broker.tier.service import TierService


def tier_service(config: BrokerConfig, store: MessageStore, topics: TopicConfigManager,
                 clock: Clock) -> TierService | None:
    """The broker's tier, or None without ``tierStorageUrl``."""
    if not config.tier_storage_url:
        return None
    try:
        from skiff.broker.tier.service import TierService
    except ImportError as exc:
        raise ConfigError(f"tierStorageUrl needs the tier extra (pip install 'skiffmq[tier]'): {exc}") from None
    from skiff.tier.backends import TierError

    try:
        return TierService(config, store, topics, clock)
    except TierError as exc:
        raise ConfigError(f"tierStorageUrl={config.tier_storage_url}: {exc}") from None


def tier_periodics(tier: TierService | None) -> list[Periodic]:
    return [] if tier is None else [tier.periodic()]


def attach_reads(ops: Operations, tier: TierService | None, wake: Callable[[list[tuple[str, int]]], None]) -> None:
    """Pulls and pops below what is kept locally read through the tier (``wake`` told the queues
    whose pulls may be held while the tier fetches for them), a queue's first offset
    is the tier's where it reaches further back, gRPC's and Kafka's searches by time and resets
    of a group's offsets by time look in the tier, and a send-back finds a message the CommitLog
    no longer holds in the tier."""
    if tier is not None:
        ops.pull.tier_read = tier.reads.read
        ops.pull.tier_waiting = tier.reads.waiting
        on_tier_ready(tier, wake)
        ops.pull.first_offset = ops.offsets.min_offset
        ops.offsets.tier_first = tier.first_offset
        ops.pop.service.tier_read = tier.reads.read
        ops.pop.service.first_offset = ops.offsets.min_offset
        from skiff.broker.tier.queries import QueryHooks

        hooks = QueryHooks(tier)
        ops.offsets.tier_at_time = hooks.offset_at_time
        ops.messages.tier_record = hooks.record_at


def on_tier_ready(tier: TierService | None, wake: Callable[[list[tuple[str, int]]], None]) -> None:
    """``wake`` told (on the tier's worker threads) the queues whose tier work ended, done or
    failed, so a door holding reads of them reads again (`TierReads.ready_listeners`); nothing
    without a tier, whose pulls are never told to wait."""
    if tier is not None:
        tier.reads.ready_listeners.append(wake)


def with_tier_queries(handlers: dict[int, Handler], tier: TierService | None) -> dict[int, Handler]:
    """``handlers`` whose queries by key, message id and time also find what only the tier
    holds (`skiff.broker.tier.queries`); unchanged without a tier."""
    if tier is None:
        return handlers
    from skiff.broker.tier.queries import wrap_queries

    return wrap_queries(handlers, tier)
