"""Pull: messages of one queue from an offset, as slices of the CommitLog.

One operation for the remoting PULL_MESSAGE and the gRPC PullMessage: the gate's
consumption checks, the subscription (the request's own expression, or the one the
group's heartbeat registered), one read of the store, and the commit of the offset
the request carries. Long polling stays with the door that offers it (the remoting
adapter holds a pull that found nothing, then runs `read` again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from skiff.broker.clients import ClientManager
from skiff.broker.config import BrokerConfig
from skiff.broker.ha.role import Role
from skiff.broker.offsets import ConsumerOffsetManager
from skiff.broker.operations.gate import Gate
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.subscription import compile_subscription, record_filter
from skiff.broker.stats import BrokerStats
from skiff.filter import MessageFilter
from skiff.protocol.codes import ResponseCode
from skiff.store import GetResult, GetStatus, MessageStore


GONE_LOCALLY = frozenset({GetStatus.OFFSET_TOO_SMALL, GetStatus.MESSAGE_WAS_REMOVING, GetStatus.OFFSET_FOUND_NULL})
"""The store's answers for an offset whose local copy is gone or going: below the queue's
minimum; its CommitLog file deleted while the ConsumeQueue still lists it (retention deletes the
CommitLog first, the ConsumeQueue's minimum follows); its ConsumeQueue file deleted. A tiered
topic's read asks the tier on each: on the last two the store's answer steps past the offsets,
which a consumer would then never get although the tier holds them."""


class PullRequest(NamedTuple):
    """One pull, as either door asks it. A NamedTuple, not a frozen dataclass: the remoting
    door makes one per PULL_MESSAGE, and at 32 messages per pull its construction was a
    tenth of the operation's cost (1.5 vs 0.4 us)."""

    group: str
    topic: str
    queue_id: int
    offset: int
    max_count: int
    expression: str | None = None
    """The subscription's expression; None: the one the group's heartbeat registered."""
    expression_type: str | None = None
    commit_offset: int | None = None
    """The group's consumed offset to store with the pull (remoting's COMMIT_OFFSET flag)."""


class Pulled(NamedTuple):
    """What a read found: the store's result (its status, the records' slices, the next
    offset) and the filter a held pull reads again with."""

    result: GetResult
    filter: MessageFilter


class PullOperation:
    def __init__(self, config: BrokerConfig, role: Role, store: MessageStore, gate: Gate,
                 clients: ClientManager, offsets: ConsumerOffsetManager, stats: BrokerStats) -> None:
        self.config = config
        self.role = role
        self.store = store
        self.gate = gate
        self.clients = clients
        self.offsets = offsets
        self.stats = stats
        self._max_count = config.max_transfer_count_on_message_in_memory
        self._max_bytes = config.max_transfer_bytes_on_message_in_memory
        self.tier_read: Callable[[PullRequest, MessageFilter, GetResult], GetResult] | None = None
        """Set when the broker has a tier: a read below what is kept locally goes there
        (skiff.broker.tier.reads)."""
        self.tier_waiting: Callable[[str, int], bool] = _never
        """Whether a pull of the queue was told to retry while the tier fetches or rebuilds what it
        asked for (set with ``tier_read``): a door may hold such a pull."""
        self.first_offset: Callable[[str, int], int] = store.get_min_offset
        """A queue's first readable offset: the tier's where it reaches back further than the
        disk (set with ``tier_read``; Kafka's Fetch bounds its offsets with it)."""

    def pull(self, req: PullRequest) -> Pulled | Refusal:
        """Check, read once, and commit the offset the request carries."""
        flt = self.check(req)
        if isinstance(flt, Refusal):
            return flt
        pulled = self.read(req, flt)
        if req.commit_offset is not None and not self.role.is_slave:  # as RocketMQ: a slave never stores it
            self.offsets.commit(req.group, req.topic, req.queue_id, req.commit_offset)
        return pulled

    def check(self, req: PullRequest) -> MessageFilter | Refusal:
        """The filter to read with, or why the pull is refused."""
        group = self.gate.consumable(req.group, req.topic, req.queue_id)
        if isinstance(group, Refusal):
            return group
        if req.expression is not None:
            expression, kind = req.expression, req.expression_type
        else:
            sub = self.clients.subscription(req.group, req.topic)
            if sub is None:
                return Refusal(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                               f"consumer group {req.group} has no subscription to {req.topic} registered "
                               f"here: send a heartbeat first, or the subscription in the pull")
            expression, kind = sub.sub_string, sub.expression_type.value
        return compile_subscription(expression, kind, self.config.enable_property_filter)

    def read(self, req: PullRequest, flt: MessageFilter) -> Pulled:
        """Read the queue once (no checks: `check` made them)."""
        result = self.store.get_messages(
            req.topic, req.queue_id, req.offset, min(req.max_count, self._max_count),
            tag_codes=flt.tag_codes, record_filter=record_filter(flt), max_bytes=self._max_bytes,
        )
        if self.tier_read is not None and result.status in GONE_LOCALLY:
            result = self.tier_read(req, flt, result)
        if result.found:
            self.stats.pulled(result.message_count, req.topic, req.group, req.queue_id, result.total_bytes,
                              result.next_begin_offset)
        return Pulled(result, flt)


def _never(topic: str, queue_id: int) -> bool:
    return False
