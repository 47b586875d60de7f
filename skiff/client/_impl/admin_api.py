"""AdminAPI: the RPCs of admin tools (RocketMQ's MQClientAPIImpl admin half).

Topic and subscription-group configuration, stats and connections go to one
broker address; topic deletion also goes to each NameServer by address.
"""

from __future__ import annotations

from typing import Any

from skiff.client._impl.api import MQClientAPI
from skiff.common.message import MessageQueue
from skiff.common.names import TBW102
from skiff.protocol.bodies.admin import KVTable, SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicStatsTable
from skiff.protocol.bodies.client_calls import ConsumerRunningInfo, ResetOffsetBody
from skiff.protocol.bodies.consumer import ConsumeStats, ConsumerConnection
from skiff.protocol.bodies.route import TopicList
from skiff.protocol.bodies.compaction import TopicCompactionBody
from skiff.protocol.bodies.tier import TopicTierBody
from skiff.protocol.bodies.timer import CancelScheduledBody, TimerSlotsBody
from skiff.protocol.bodies.topic import TopicConfig, TopicConfigSerializeWrapper
from skiff.protocol.bodies.topic_attributes import changes_text
from skiff.protocol import fastjson
from skiff.protocol.codes import AuthRequestCode, RequestCode, SkiffRequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers import admin as ha
from skiff.protocol.headers.client_calls import GetConsumerRunningInfoRequestHeader, ResetOffsetRequestHeader
from skiff.protocol.headers.compaction import CompactionRequestHeader
from skiff.protocol.headers.timer import CancelScheduledMessageRequestHeader
from skiff.protocol.headers.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigKeyHeader,
    PutKVConfigRequestHeader,
)


class AdminAPI(MQClientAPI):
    """`MQClientAPI` plus the admin RPCs."""

    async def _call(self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
                    timeout_ms: int | None = None) -> RemotingCommand:
        return await self.invoke(addr, RemotingCommand.request(code, ext, body), timeout_ms)

    # ------------------------------------------------------------- topics

    async def create_topic(self, addr: str, config: TopicConfig, timeout_ms: int | None = None) -> None:
        """Create or update ``config.topic_name`` on the broker at ``addr``."""
        header = ha.CreateTopicRequestHeader(
            config.topic_name, TBW102, config.read_queue_nums, config.write_queue_nums, int(config.perm),
            config.topic_filter_type.value, config.topic_sys_flag, config.order,
            changes_text(config.attributes) or None)
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext(), timeout_ms=timeout_ms)

    async def delete_topic_in_broker(self, addr: str, topic: str, timeout_ms: int | None = None) -> None:
        await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, ha.DeleteTopicRequestHeader(topic).to_ext(),
                         timeout_ms=timeout_ms)

    async def delete_topic_in_namesrv(self, namesrv_addr: str, topic: str, cluster: str | None = None,
                                      timeout_ms: int | None = None) -> None:
        header = DeleteTopicFromNamesrvRequestHeader(topic, cluster)
        await self._call(namesrv_addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, header.to_ext(), timeout_ms=timeout_ms)

    async def put_kv_config(self, namesrv_addr: str, namespace: str, key: str, value: str,
                            timeout_ms: int | None = None) -> None:
        """Set a NameServer KV entry (ORDER_TOPIC_CONFIG holds order topics' queue layouts)."""
        header = PutKVConfigRequestHeader(namespace, key, value)
        await self._call(namesrv_addr, RequestCode.PUT_KV_CONFIG, header.to_ext(), timeout_ms=timeout_ms)

    async def delete_kv_config(self, namesrv_addr: str, namespace: str, key: str,
                               timeout_ms: int | None = None) -> None:
        header = KVConfigKeyHeader(namespace, key)
        await self._call(namesrv_addr, RequestCode.DELETE_KV_CONFIG, header.to_ext(), timeout_ms=timeout_ms)

    async def get_topics_by_cluster(self, cluster: str, timeout_ms: int | None = None) -> list[str]:
        cmd = RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER,
                                      GetTopicsByClusterRequestHeader(cluster).to_ext())
        resp = await self.invoke_namesrv(cmd, timeout_ms)
        return list(TopicList.from_json(resp.body).topic_list) if resp.body else []

    async def get_all_topic_config(self, addr: str, timeout_ms: int | None = None) -> TopicConfigSerializeWrapper:
        resp = await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG, timeout_ms=timeout_ms)
        return TopicConfigSerializeWrapper.from_json(resp.body) if resp.body else TopicConfigSerializeWrapper()

    async def get_topic_stats(self, addr: str, topic: str, timeout_ms: int | None = None) -> TopicStatsTable:
        """Per queue of ``topic`` on that broker: min and max offsets, last store time."""
        resp = await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                ha.GetTopicStatsInfoRequestHeader(topic).to_ext(), timeout_ms=timeout_ms)
        return TopicStatsTable.from_json(resp.body) if resp.body else TopicStatsTable()

    # ------------------------------------------------------ consumer groups

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig,
                                        timeout_ms: int | None = None) -> None:
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.to_json(), timeout_ms)

    async def delete_subscription_group(self, addr: str, group: str, *, remove_offset: bool = True,
                                        timeout_ms: int | None = None) -> None:
        header = ha.DeleteSubscriptionGroupRequestHeader(group, remove_offset)
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header.to_ext(), timeout_ms=timeout_ms)

    async def get_all_subscription_groups(self, addr: str, timeout_ms: int | None = None) -> SubscriptionGroupWrapper:
        resp = await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, timeout_ms=timeout_ms)
        return SubscriptionGroupWrapper.from_json(resp.body) if resp.body else SubscriptionGroupWrapper()

    async def get_consume_stats(self, addr: str, group: str, topic: str | None = None,
                                timeout_ms: int | None = None) -> ConsumeStats:
        """Per queue on that broker: its max offset and the group's committed offset."""
        header = ha.GetConsumeStatsRequestHeader(group, topic)
        resp = await self._call(addr, RequestCode.GET_CONSUME_STATS, header.to_ext(), timeout_ms=timeout_ms)
        return ConsumeStats.from_json(resp.body) if resp.body else ConsumeStats()

    async def get_consumer_connection_list(self, addr: str, group: str,
                                           timeout_ms: int | None = None) -> ConsumerConnection:
        header = ha.GetConsumerConnectionListRequestHeader(group)
        resp = await self._call(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header.to_ext(),
                                timeout_ms=timeout_ms)
        return ConsumerConnection.from_json(resp.body) if resp.body else ConsumerConnection()

    async def invoke_broker_to_reset_offset(self, addr: str, topic: str, group: str, timestamp_ms: int, *,
                                            force: bool = True,
                                            timeout_ms: int | None = None) -> dict[MessageQueue, int]:
        """Reset ``group``'s offsets on ``topic`` (on that broker) to the first message stored
        at ``timestamp_ms``; returns the new offset per queue. The broker tells live consumers."""
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force)
        resp = await self._call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext(),
                                timeout_ms=timeout_ms)
        return dict(ResetOffsetBody.from_json(resp.body).offset_table) if resp.body else {}

    async def get_consumer_running_info(self, addr: str, group: str, client_id: str,
                                        timeout_ms: int | None = None) -> ConsumerRunningInfo:
        header = GetConsumerRunningInfoRequestHeader(group, client_id)
        resp = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header.to_ext(),
                                timeout_ms=timeout_ms)
        return ConsumerRunningInfo.from_json(resp.body)

    # ---------------------------------------------------------------- broker

    async def get_broker_runtime_info(self, addr: str, timeout_ms: int | None = None) -> dict[str, str]:
        resp = await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_ms=timeout_ms)
        return dict(KVTable.from_json(resp.body).table) if resp.body else {}

    # ----------------------------------------------------------- timer (Skiff)

    async def get_timer_slots(self, addr: str, timeout_ms: int | None = None) -> TimerSlotsBody:
        """Scheduled messages per slot and the timer's counters (Skiff brokers only)."""
        resp = await self._call(addr, SkiffRequestCode.GET_TIMER_SLOTS, timeout_ms=timeout_ms)
        return TimerSlotsBody.from_json(resp.body)

    async def cancel_scheduled_message(self, addr: str, msg_id: str,
                                       timeout_ms: int | None = None) -> CancelScheduledBody:
        """Cancel what ``msg_id`` (UNIQ_KEY or offsetMsgId) names on that broker; the body says what happened."""
        header = CancelScheduledMessageRequestHeader(msg_id)
        resp = await self._call(addr, SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE, header.to_ext(),
                                timeout_ms=timeout_ms)
        return CancelScheduledBody.from_json(resp.body)

    # ------------------------------------------------------ compaction (Skiff)

    async def compaction(self, addr: str, topic: str, *, run: bool = False,
                         timeout_ms: int | None = None) -> TopicCompactionBody:
        """The topic's compaction state on that broker; ``run`` compacts every queue first
        (Skiff brokers only; a run can take a while, so give it a generous timeout)."""
        code = SkiffRequestCode.COMPACT_TOPIC if run else SkiffRequestCode.GET_COMPACTION_STATUS
        resp = await self._call(addr, code, CompactionRequestHeader(topic).to_ext(), timeout_ms=timeout_ms)
        return TopicCompactionBody.from_json(resp.body)

    async def tier(self, addr: str, topic: str, *, upload: bool = False,
                   timeout_ms: int | None = None) -> TopicTierBody:
        """The topic's tier state on that broker; ``upload`` runs its uploader over the topic first."""
        code = SkiffRequestCode.TIER_UPLOAD_NOW if upload else SkiffRequestCode.GET_TIER_STATUS
        resp = await self._call(addr, code, CompactionRequestHeader(topic).to_ext(), timeout_ms=timeout_ms)
        return TopicTierBody.from_json(resp.body)

    # ------------------------------------------------------- users and ACLs

    async def auth_request(self, addr: str, code: AuthRequestCode, ext: dict[str, str], body: Any = None,
                           timeout_ms: int | None = None) -> Any:
        """One of RocketMQ 5.3's user/ACL requests (UserInfo and AclInfo as JSON); the answer's
        JSON body, or None when it has none."""
        payload = fastjson.dumps(body) if body is not None else b""
        resp = await self._call(addr, code, {k: v for k, v in ext.items() if v}, payload, timeout_ms=timeout_ms)
        return fastjson.loads(bytes(resp.body)) if resp.body else None
