"""Rebalance: which queues this consumer holds (RocketMQ's RebalanceImpl).

For each subscribed topic: all its readable queues (from the route) and, in
clustering mode, every live member of the group (GET_CONSUMER_LIST_BY_GROUP on
one of the topic's brokers), both sorted, go through the allocation strategy;
broadcasting consumers take every queue. Queues no longer allocated are
dropped (the owner hook commits their offsets and, for orderly consumers,
unlocks them); new ones get a `ProcessQueue` and a start offset — the group's
committed offset, else where ``consume_from_where`` says — and the owner hook
starts pulling them. Orderly clustering consumers take a new queue only once
its broker lock is theirs.

It runs when the consumer starts, every ``rebalance_interval_ms`` and when a
broker says the group changed; runs never overlap. One topic's failure (no
route yet, a broker down) is logged and leaves that topic's queues as they were.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol

from skiff.client._impl.consumer_core import HALF_AN_HOUR_MS, ConsumerCore
from skiff.client._impl.offset_store import ReadFrom
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client.errors import NoRouteError
from skiff.common.message import MessageQueue
from skiff.common.names import is_retry_topic
from skiff.protocol.bodies.heartbeat import ConsumeFromWhere
from skiff.protocol.bodies.lock import LockBatchRequestBody

log = logging.getLogger(__name__)


class RebalanceOwner(Protocol):
    """What the consumer does when a queue becomes, or stops being, its own."""

    async def queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None: ...

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """``pq`` is already marked dropped."""
        ...


class Rebalancer:
    def __init__(self, core: ConsumerCore, owner: RebalanceOwner, *, orderly: bool, drop_idle_queues: bool) -> None:
        self._core = core
        self._owner = owner
        self._locking = orderly and core.settings.clustering
        self._drop_idle = drop_idle_queues
        self.table: dict[MessageQueue, ProcessQueue] = {}
        self._running = asyncio.Lock()

    async def rebalance(self) -> None:
        async with self._running:
            for topic in sorted(self._core.subscriptions):
                try:
                    await self._rebalance_topic(topic)
                except NoRouteError as exc:
                    (log.debug if is_retry_topic(topic) else log.warning)("rebalance %s: %s", self._core.group, exc)
                except Exception as exc:  # noqa: BLE001 - the next run tries again
                    log.warning("rebalancing %s of group %s failed: %s", topic, self._core.group, exc)
            strays = [mq for mq in self.table if mq.topic not in self._core.subscriptions]
            await self._drop(strays)

    async def drop_all(self) -> None:
        """Give up every queue (shutdown): offsets committed, locks released."""
        async with self._running:
            await self._drop(list(self.table))

    async def forget(self, mqs: Iterable[MessageQueue]) -> None:
        """Drop queues without releasing them through the owner (a reset commits new offsets itself)."""
        async with self._running:
            for mq in list(mqs):
                pq = self.table.pop(mq, None)
                if pq is not None:
                    pq.dropped = True

    async def _rebalance_topic(self, topic: str) -> None:
        core = self._core
        mq_all = sorted(await core.instance.routes.subscribe_queues(topic))
        if not mq_all:
            log.warning("rebalance %s: topic %s has no readable queue", core.group, topic)
            return
        if core.settings.clustering:
            cid_all = sorted(await self.consumer_ids(topic))
            if not cid_all:
                log.warning("rebalance %s: no broker of %s knows the group's consumers yet", core.group, topic)
                return
            mine = core.settings.allocate_strategy.allocate(core.group, core.client_id, mq_all, cid_all)
            if core.client_id not in cid_all:
                log.warning("rebalance %s: this client (%s) is not among the group's consumers %s",
                            core.group, core.client_id, cid_all)
        else:
            mine = mq_all
        await self._update(topic, set(mine))

    async def consumer_ids(self, topic: str) -> list[str]:
        """The group's members as one of the topic's brokers knows them (another on failure)."""
        instance = self._core.instance
        route = await instance.routes.route(topic)
        names = [b.broker_name for b in route.broker_datas]
        random.shuffle(names)
        error: Exception | None = None
        for name in names:
            try:
                addr = instance.routes.find_broker_addr(name)
                return await instance.api.get_consumer_id_list(addr, self._core.group)
            except Exception as exc:  # noqa: BLE001 - ask the next broker
                error = exc
        if error is not None:
            raise error
        return []

    async def _update(self, topic: str, mine: set[MessageQueue]) -> None:
        held = {mq: pq for mq, pq in self.table.items() if mq.topic == topic}
        gone = [mq for mq, pq in held.items() if mq not in mine or (self._drop_idle and pq.pull_expired())]
        await self._drop(gone)
        added = []
        for mq in sorted(mine - held.keys()):
            if await self._add(mq):
                added.append(mq)
        if gone or added:
            log.info("rebalance %s (%s): %s now holds %s (+%s -%s)", self._core.group, self._core.client_id, topic,
                     _names(mine), _names(added), _names(gone))

    async def _add(self, mq: MessageQueue) -> bool:
        core = self._core
        if self._locking and not await self.lock(mq):
            log.info("rebalance %s: %s is locked by another client; trying again later", core.group, mq)
            return False
        core.offset_store.remove(mq)
        try:
            offset = await self.compute_pull_from_where(mq)
        except Exception as exc:  # noqa: BLE001 - start it at the next rebalance rather than from a guess
            log.warning("rebalance %s: no start offset for %s (%s); trying again later", core.group, mq, exc)
            return False
        pq = ProcessQueue(core.clock)
        if self._locking:
            pq.mark_locked(True)
        self.table[mq] = pq
        await self._owner.queue_added(mq, pq, offset)
        return True

    async def _drop(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in list(mqs):
            pq = self.table.pop(mq, None)
            if pq is None:
                continue
            pq.dropped = True
            try:
                await self._owner.queue_removed(mq, pq)
            except Exception as exc:  # noqa: BLE001
                log.warning("rebalance %s: releasing %s failed: %s", self._core.group, mq, exc)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``, else where ``consume_from_where`` points."""
        core = self._core
        committed = await core.offset_store.read(mq, ReadFrom.STORE)
        if committed >= 0:
            return committed
        where = core.settings.consume_from_where
        if where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if is_retry_topic(mq.topic) and where != ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            return 0
        api = core.instance.api
        addr = core.instance.routes.find_broker_addr(mq.broker_name)
        if where == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not is_retry_topic(mq.topic):
            return await api.search_offset(addr, mq, self.consume_timestamp_ms())
        return await api.get_max_offset(addr, mq)

    def consume_timestamp_ms(self) -> int:
        ts = self._core.settings.consume_timestamp_ms
        return ts if ts is not None else self._core.clock.now_ms() - HALF_AN_HOUR_MS

    # ------------------------------------------------------------------ locks

    def _lock_body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(self._core.group, self._core.client_id, tuple(sorted(mqs)))

    async def lock(self, mq: MessageQueue) -> bool:
        """Lock one queue on its broker for this client; marks its process queue."""
        instance = self._core.instance
        try:
            addr = instance.routes.require_master(mq.broker_name)
            locked = mq in await instance.api.lock_batch_mq(addr, self._lock_body([mq]))
        except Exception as exc:  # noqa: BLE001 - not locked; the caller tries again later
            log.warning("locking %s failed: %s", mq, exc)
            locked = False
        pq = self.table.get(mq)
        if pq is not None:
            pq.mark_locked(locked)
        return locked

    async def lock_all(self) -> None:
        """Renew the locks of every held queue, one request per broker."""
        for broker_name, mqs in self._by_broker(self.table).items():
            instance = self._core.instance
            try:
                addr = instance.routes.require_master(broker_name)
                locked = await instance.api.lock_batch_mq(addr, self._lock_body(mqs))
            except Exception as exc:  # noqa: BLE001
                log.warning("renewing the locks on %s failed: %s", broker_name, exc)
                continue
            for mq in mqs:
                pq = self.table.get(mq)
                if pq is not None:
                    pq.mark_locked(mq in locked)
                    if mq not in locked:
                        log.warning("lost the lock of %s", mq)

    async def unlock(self, mqs: Iterable[MessageQueue]) -> None:
        for broker_name, group in self._by_broker(mqs).items():
            instance = self._core.instance
            try:
                addr = instance.routes.require_master(broker_name)
                await instance.api.unlock_batch_mq(addr, self._lock_body(group))
            except Exception as exc:  # noqa: BLE001 - the broker's lock expires on its own
                log.warning("unlocking %s on %s failed: %s", _names(group), broker_name, exc)

    @staticmethod
    def _by_broker(mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        out: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            out[mq.broker_name].append(mq)
        return out


def _names(mqs: Iterable[MessageQueue]) -> str:
    return "[" + ", ".join(f"{mq.broker_name}:{mq.queue_id}" for mq in sorted(mqs)) + "]"
