"""A slave's metadata sync from its master (RocketMQ's SlaveSynchronize), plus the
reverse sync of consumer offsets that 4.x lacks.

Every ``slaveSyncInterval`` (10 s, as RocketMQ), and at once when the slave
(re)connects to its master or replicates a topic it does not know, the slave
asks its master's remoting port (the ``masterAddr`` the NameServer answered):

| code | request | applied |
|---|---|---|
| 21 | GET_ALL_TOPIC_CONFIG | the whole table, when its dataVersion differs |
| 43 | GET_ALL_CONSUMER_OFFSET | merged: the master's offsets, except larger ones committed here |
| 201 | GET_ALL_SUBSCRIPTIONGROUP_CONFIG | the whole table, when its dataVersion differs |
| 3005, 3010 | AUTH_LIST_USER, AUTH_LIST_ACL | ACL 2.0's users and ACLs, when they differ (`skiff.broker.auth.replica`) |

With ACL 2.0 on, the master checks these requests too: the slave signs them with
``innerClientAuthenticationCredentials`` (``sign``).

Offsets consumers commit to the slave while the master is down are kept: before
taking the master's table, the slave sends the master each offset committed here
that is larger than the master's (UPDATE_CONSUMER_OFFSET), so a master that comes
back continues from where consumers got, instead of rolling them back (4.x
overwrote the slave's offsets: apache/rocketmq#1094, #7790).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.offsets import ConsumerOffsetManager, ConsumerOffsetTable
from skiff.broker.topics import TopicConfigManager
from skiff.common.errors import DecodeError
from skiff.common.service import Service
from skiff.protocol.bodies.admin import SubscriptionGroupWrapper
from skiff.protocol.bodies.topic import TopicConfigSerializeWrapper
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.errors import RemotingError
from skiff.protocol.headers.consumer import UpdateConsumerOffsetRequestHeader
from skiff.transport import RemotingClient

log = logging.getLogger(__name__)

TIMEOUT_MS = 3_000


class SlaveSynchronizer(Service):
    name = "slave-sync"

    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, groups: SubscriptionGroupManager,
                 offsets: ConsumerOffsetManager, client: RemotingClient) -> None:
        super().__init__()
        self.config = config
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.client = client
        self.steps: list[Callable[[str], Awaitable[None]]] = []
        """More of the master's metadata to copy each round (ACL 2.0's users and ACLs)."""
        self.sign: Callable[[RemotingCommand], None] = lambda cmd: None
        """Signs each request to the master (the broker's inner credentials under ACL 2.0)."""
        self.master_addr: str | None = None
        self.rounds = 0
        self._soon = asyncio.Event()
        offsets.track_local = True

    def set_master(self, addr: str | None) -> None:
        """Sync from the master at ``addr`` (None: this broker is master now, stop)."""
        if addr != self.master_addr:
            self.master_addr = addr
            if addr:
                log.info("syncing metadata from the master at %s", addr)
                self.trigger()

    def trigger(self) -> None:
        self._soon.set()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Wake the loop, which then sees it is stopping, instead of waiting out ``timeout_s``
        (every slave's clean stop took 5 s more: the loop slept until its next round)."""
        self._soon.set()
        await super().stop(timeout_s)

    async def run(self) -> None:
        interval_s = self.config.slave_sync_interval_ms / 1000
        while not self.stopping:
            try:
                await asyncio.wait_for(self._soon.wait(), interval_s)
            except asyncio.TimeoutError:
                pass
            self._soon.clear()
            if self.master_addr and not self.stopping:
                await self.sync_all(self.master_addr)

    async def sync_all(self, addr: str) -> bool:
        """One round; False when the master did not answer (the next round retries)."""
        try:
            await self._sync_topics(addr)
            await self._sync_offsets(addr)
            await self._sync_groups(addr)
            for step in self.steps:
                await step(addr)
        except (RemotingError, DecodeError, SyncError) as exc:
            log.debug("metadata sync from %s failed: %s", addr, exc)
            return False
        self.rounds += 1
        return True

    async def _get(self, addr: str, code: int) -> bytes:
        cmd = RemotingCommand.request(code)
        self.sign(cmd)
        resp = await self.client.invoke(addr, cmd, TIMEOUT_MS)
        if resp.code != ResponseCode.SUCCESS:
            raise SyncError(f"request {code} answered {resp.code}: {resp.remark}")
        return bytes(resp.body)

    async def _sync_topics(self, addr: str) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(await self._get(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        self.topics.replace(wrapper.topic_config_table, wrapper.data_version)

    async def _sync_groups(self, addr: str) -> None:
        wrapper = SubscriptionGroupWrapper.from_json(
            await self._get(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        self.groups.replace(wrapper.subscription_group_table, wrapper.data_version)

    async def _sync_offsets(self, addr: str) -> None:
        master = ConsumerOffsetTable.from_json(await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        ahead = self._ahead_of(master)
        if ahead:
            await asyncio.gather(*(self._push(addr, *item) for item in ahead))
            log.info("sent the master %d consumer offsets committed on this slave", len(ahead))
            master = ConsumerOffsetTable.from_json(await self._get(addr, RequestCode.GET_ALL_CONSUMER_OFFSET))
        self.offsets.merge_master(master)

    def _ahead_of(self, master: ConsumerOffsetTable) -> list[tuple[str, str, int, int]]:
        table = master.offset_table
        out = []
        for (group, topic, queue_id), offset in self.offsets.local.items():
            if offset > table.get(f"{topic}@{group}", {}).get(queue_id, -1):
                out.append((group, topic, queue_id, offset))
        return out

    async def _push(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
        cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        self.sign(cmd)
        resp = await self.client.invoke(addr, cmd, TIMEOUT_MS)
        if resp.code != ResponseCode.SUCCESS:
            raise SyncError(f"UPDATE_CONSUMER_OFFSET answered {resp.code}: {resp.remark}")


class SyncError(Exception):
    """The master refused a sync request."""
