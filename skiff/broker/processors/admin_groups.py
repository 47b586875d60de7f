"""Admin requests about consumer and producer groups: the remoting door's adapter over
`skiff.broker.operations` (groups, consume_stats, connections, offset_reset).

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204) and
INVOKE_BROKER_TO_RESET_OFFSET (222): each decodes its header or body, calls the
operation and answers its outcome as the JSON body, or its refusal's code and reason.
"""

from __future__ import annotations

from skiff.broker.operations import (
    ConnectionsOperation,
    ConsumeStatsOperation,
    ConsumeStatsRequest,
    GroupDeletion,
    GroupsOperation,
    OffsetReset,
    OffsetResetOperation,
    Refusal,
)
from skiff.broker.processors.answers import answer
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers import admin as h
from skiff.protocol.headers.client_calls import ResetOffsetRequestHeader
from skiff.transport.connection import Connection, Handler


class GroupAdminProcessor:
    def __init__(self, groups: GroupsOperation, consume_stats: ConsumeStatsOperation,
                 connections: ConnectionsOperation, offset_reset: OffsetResetOperation) -> None:
        self.groups = groups
        self.stats = consume_stats
        self.connections = connections
        self.offset_reset = offset_reset

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
        }

    def create_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        outcome = self.groups.put(SubscriptionGroupConfig.from_json(req.body))
        return answer(req, outcome if isinstance(outcome, Refusal) else None)

    def all_groups(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        return req.response(body=self.groups.table().to_json())

    def delete_group(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        d = h.DeleteSubscriptionGroupRequestHeader.from_ext(req.ext_fields)
        self.groups.delete(GroupDeletion(d.group_name, d.remove_offset))
        return req.response()

    def consume_stats(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        q = h.GetConsumeStatsRequestHeader.from_ext(req.ext_fields)
        return answer(req, self.stats.stats(ConsumeStatsRequest(q.consumer_group, q.topic or "")))

    def consumer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetConsumerConnectionListRequestHeader.from_ext(req.ext_fields).consumer_group
        return answer(req, self.connections.consumer_connection(group))

    def producer_connections(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        group = h.GetProducerConnectionListRequestHeader.from_ext(req.ext_fields).producer_group
        return answer(req, self.connections.producer_connection(group))

    async def reset_offset(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        r = ResetOffsetRequestHeader.from_ext(req.ext_fields)
        return answer(req, await self.offset_reset.reset(OffsetReset(r.group, r.topic, r.timestamp, r.is_force)))

