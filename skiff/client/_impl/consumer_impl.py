"""The push consumer's engine (RocketMQ's DefaultMQPushConsumerImpl): it ties the
rebalance, the pull loops, the process queues, the consume service and the
offset store together, and is what the client instance calls back
(heartbeat data, rebalance, offset persistence, resets, running info).

Start: register with the client instance, fetch the routes of the subscribed
topics (and ``%RETRY%<group>`` in clustering mode), heartbeat every broker so
the group knows this member, rebalance. Shutdown (graceful): stop pulling,
start no more listener batches and wait (up to ``await_termination_ms``) for
those running, commit the offsets — which never pass a message that was not
consumed, so those go to the queue's next owner — unlock, unregister.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from skiff.client._impl.config import ClientConfig
from skiff.client._impl.consume_concurrently import ConsumeConcurrentlyService
from skiff.client._impl.consume_orderly import LOCK_RENEW_INTERVAL_MS, LOCK_RETRY_MS, ConsumeOrderlyService
from skiff.client._impl.consumer_core import ConsumerCore, ConsumerSettings
from skiff.client._impl.instance import ClientInstance
from skiff.client._impl.listener import ListenerRunner
from skiff.client._impl.offset_store import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore
from skiff.client._impl.process_queue import ProcessQueue
from skiff.client._impl.pull_service import FLOW_BACKOFF_MS, PullRequest, PullService, PullSettings
from skiff.client._impl.rebalance import Rebalancer
from skiff.client.errors import ClientStateError
from skiff.common.clock import SYSTEM_CLOCK, Clock
from skiff.common.message import MessageQueue
from skiff.common.stored_message import StoredMessage
from skiff.common.service import Periodic
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo
from skiff.protocol.bodies.heartbeat import ConsumerData, ConsumeType

log = logging.getLogger(__name__)


class BrokerOffsetsClient:
    """QUERY/UPDATE_CONSUMER_OFFSET for one group, sent to each queue's master, or to a
    slave while the group has no master (the slave keeps them and gives them back to the
    master when it returns: docs/replication.md)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self._instance = instance
        self._group = group

    async def _addr(self, mq: MessageQueue) -> str:
        routes = self._instance.routes
        if routes.broker_data(mq.broker_name) is None:
            await routes.route(mq.topic)
        return routes.find_broker_addr(mq.broker_name)

    async def query_consumer_offset(self, mq: MessageQueue) -> int | None:
        return await self._instance.api.query_consumer_offset(await self._addr(mq), self._group, mq)

    async def update_consumer_offset(self, mq: MessageQueue, offset: int) -> None:
        await self._instance.api.update_consumer_offset(await self._addr(mq), self._group, mq, offset)


def make_offset_store(instance: ClientInstance, group: str, settings: ConsumerSettings) -> OffsetStore:
    """Broker offsets in clustering mode, a local file per client and group in broadcasting mode.

    The file's directory is named ``<client ip>@<instance name>``, not by the client
    id (which holds the pid), so a restarted broadcasting consumer finds its offsets.
    """
    if settings.clustering:
        return RemoteOffsetStore(BrokerOffsetsClient(instance, group))
    key = f"{instance.config.client_ip}@{instance.config.instance_name}"
    return LocalFileOffsetStore.for_client(settings.offsets_dir, key, group)


class PushConsumerImpl:
    """One running push consumer; made by `AsyncPushConsumer.start`."""

    def __init__(self, group: str, config: ClientConfig, settings: ConsumerSettings, listener: Callable[..., Any],
                 *, orderly: bool, subscriptions: Iterable[tuple[str, Any]], clock: Clock = SYSTEM_CLOCK) -> None:
        self.instance = ClientInstance.get(config)
        self.orderly = orderly
        store = make_offset_store(self.instance, group, settings)
        self.core = ConsumerCore(group, settings, self.instance, store, ConsumeType.CONSUME_PASSIVELY, clock)
        for topic, expression in subscriptions:
            self.core.subscribe(topic, expression)
        self.core.subscribe_retry_topic()
        self.runner = ListenerRunner(listener, settings.consume_thread_max, name=f"consume-{group}")
        self.rebalancer = Rebalancer(self.core, self, orderly=orderly, drop_idle_queues=True)
        self.pulls = PullService(self.core, PullSettings(settings.pull_batch_size,
                                                         commit_offset=settings.clustering), self)
        self.consume: ConsumeConcurrentlyService | ConsumeOrderlyService
        if orderly:
            self.consume = ConsumeOrderlyService(self.core, self.runner, self.rebalancer.lock, self.pulls.wake)
        else:
            self.consume = ConsumeConcurrentlyService(self.core, self.runner, self.pulls.wake)
        self._locks = Periodic("orderly-lock", LOCK_RENEW_INTERVAL_MS / 1000, self.rebalancer.lock_all)
        self._started = False
        self._stopped = False

    @property
    def group(self) -> str:
        return self.core.group

    @property
    def settings(self) -> ConsumerSettings:
        return self.core.settings

    async def start(self) -> None:
        self._started = True
        await self.core.join(self)
        if self.orderly and self.settings.clustering:
            self._locks.start()
        await self.rebalance()

    # ----------------------------------------------------- the instance's calls

    def consumer_data(self) -> ConsumerData:
        return self.core.consumer_data()

    async def rebalance(self) -> None:
        if not self._stopped:
            await self.rebalancer.rebalance()

    async def persist_offsets(self) -> None:
        await self.core.offset_store.persist_all(list(self.rebalancer.table))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Restart ``topic``'s queues at the given offsets (RESET_CONSUMER_CLIENT_OFFSET)."""
        held = {mq: pq for mq, pq in self.rebalancer.table.items() if mq.topic == topic and mq in offsets}
        await self.rebalancer.forget(held)
        for mq, pq in held.items():
            self.pulls.stop(mq)
            pq.clear()
        await self._wait_consuming(held)
        store = self.core.offset_store
        for mq, offset in offsets.items():
            store.update(mq, offset)
            try:
                await store.persist(mq)
            except Exception as exc:  # noqa: BLE001
                log.warning("committing the reset offset of %s failed: %s", mq, exc)
        await self.rebalance()

    def running_info(self) -> ConsumerRunningInfo:
        store = self.core.offset_store
        s = self.settings
        props = {
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.name,
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(s.consume_thread_max),
            "PROP_NAMESERVER_ADDR": ";".join(self.instance.config.namesrv_addrs),
            "messageModel": s.message_model.name,
            "consumeFromWhere": s.consume_from_where.name,
            "pullBatchSize": str(s.pull_batch_size),
            "pullThresholdForQueue": str(s.pull_threshold_for_queue),
            "consumeMessageBatchMaxSize": str(s.consume_message_batch_max_size),
            "maxReconsumeTimes": str(s.max_reconsume_times),
        }
        return ConsumerRunningInfo(
            properties=props,
            subscription_set=tuple(sub.to_data() for sub in self.core.subscriptions.values()),
            mq_table={mq: pq.info(store.read_memory(mq)) for mq, pq in self.rebalancer.table.items()},
            status_table={topic: self.core.counters.status() for topic in self.core.subscriptions},
        )

    # --------------------------------------------------- the rebalancer's calls

    async def queue_added(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self.pulls.start(PullRequest(mq, pq, offset, self.core.subscriptions[mq.topic]))

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        self.pulls.stop(mq)
        settled = await self._wait_consuming([mq])
        store = self.core.offset_store
        try:
            await store.persist(mq)
        finally:
            store.remove(mq)
        if self.orderly and self.settings.clustering and settled:
            await self.rebalancer.unlock([mq])

    async def _wait_consuming(self, mqs: Iterable[MessageQueue]) -> bool:
        """Orderly: wait for the batch being consumed on each queue (its commit must come first)."""
        if not isinstance(self.consume, ConsumeOrderlyService):
            return True
        timeout_s = self.settings.await_termination_ms / 1000
        results = [await self.consume.wait_queue(mq, timeout_s) for mq in mqs]
        return all(results)

    # ------------------------------------------------------ the pull loops' calls

    def hold_ms(self, req: PullRequest) -> int:
        pq = req.pq
        s = self.settings
        if pq.count > s.pull_threshold_for_queue or pq.size_bytes > s.pull_threshold_size_bytes:
            return FLOW_BACKOFF_MS
        if self.orderly:
            if s.clustering and not pq.locked:
                return LOCK_RETRY_MS
        elif pq.span > s.consume_concurrently_max_span:
            return FLOW_BACKOFF_MS
        return 0

    def on_found(self, req: PullRequest, msgs: list[StoredMessage]) -> None:
        req.pq.add(msgs)
        self.consume.submit(msgs, req.pq, req.mq)

    def on_no_message(self, req: PullRequest) -> None:
        if req.pq.empty:
            self.core.offset_store.update(req.mq, req.next_offset, increase_only=True)

    # ----------------------------------------------------------------- shutdown

    async def shutdown(self) -> None:
        if self._stopped or not self._started:
            self._stopped = True
            return
        self._stopped = True
        timeout_s = self.settings.await_termination_ms / 1000
        await self._locks.stop()
        await self.pulls.stop_all()
        if isinstance(self.consume, ConsumeOrderlyService):
            self.runner.close()
            await self.consume.close(timeout_s)
        else:
            await self.runner.drain(timeout_s)
            await self.consume.close()
        await self.rebalancer.drop_all()
        self.runner.shutdown()
        await self.core.leave()

    def check_running(self) -> None:
        if not self._started or self._stopped:
            raise ClientStateError(f"the consumer of group {self.group} is not running")

