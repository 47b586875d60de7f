"""Admin requests about topics and the broker itself.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG
(21), GET_TOPIC_STATS_INFO (202), GET_BROKER_RUNTIME_INFO (28) and
GET_BROKER_CONFIG (26). Topic changes are persisted and registered with the
NameServers at once (the topic manager's ``on_change``), through `TopicsOperation`, which
Kafka's topic requests use too, as its table; a topic's stats are `TopicStatsOperation`'s, the
broker's runtime info and configuration `BrokerInfoOperation`'s. Each handler decodes, calls
the operation and encodes its outcome.
"""

from __future__ import annotations

from skiff.broker.operations.broker_info import BrokerInfoOperation
from skiff.broker.operations.refusal import Refusal
from skiff.broker.operations.topic_stats import TopicStatsOperation
from skiff.broker.operations.topics import TopicChange, TopicsOperation
from skiff.broker.processors.answers import answer
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.admin import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from skiff.transport.connection import Connection, Handler


class TopicAdminProcessor:
    def __init__(self, operation: TopicsOperation, topic_stats: TopicStatsOperation,
                 broker_info: BrokerInfoOperation) -> None:
        self.operation = operation
        self.topic_offsets = topic_stats
        self.broker_info = broker_info

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
        }

    async def create_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext(req.ext_fields)
        outcome = await self.operation.put(TopicChange(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm,
                                                       h.topic_filter_type, h.topic_sys_flag or 0, h.order,
                                                       h.attributes or ""))
        if isinstance(outcome, Refusal):
            return req.response(outcome.code, outcome.reason)
        return req.response()

    async def delete_topic(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        refusal = await self.operation.delete(DeleteTopicRequestHeader.from_ext(req.ext_fields).topic)
        if refusal is not None:
            return req.response(refusal.code, refusal.reason)
        return req.response()

    def all_topics(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return answer(req, self.operation.table())

    def topic_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        topic = GetTopicStatsInfoRequestHeader.from_ext(req.ext_fields).topic
        return answer(req, self.topic_offsets.stats(topic))

    def runtime_info(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return answer(req, self.broker_info.runtime())

    def broker_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        props = self.broker_info.properties()
        return req.response(ext_fields={"version": props.version.to_json().decode()}, body=props.text().encode())
