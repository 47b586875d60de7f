"""HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46): the remoting door's
adapter over `MembershipOperation`, which registers a connection's consumers and producers
(making a consumer's group and its retry topic ``%RETRY%<group>``), checks a subscription
before a consumer starts, and forgets a connection that closed.

A heartbeat registers everything it carries (as RocketMQ's does) but answers the first
subscription this broker cannot filter by (SUBSCRIPTION_PARSE_FAILED with the error's
position, or SYSTEM_ERROR when SQL92 is off); CHECK_CLIENT_CONFIG answers the same for one
subscription, so the consumer's start fails with it.
"""

from __future__ import annotations

from skiff.broker.operations import Heartbeat, Leaving, MembershipOperation
from skiff.broker.processors.answers import answer
from skiff.protocol.bodies.heartbeat import CheckClientRequestBody, HeartbeatData
from skiff.protocol.codes import RequestCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import UnregisterClientRequestHeader
from skiff.transport.connection import Connection, Handler


class ClientManageProcessor:
    def __init__(self, membership: MembershipOperation) -> None:
        self.membership = membership

    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def heartbeat(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.from_json(req.body)
        beat = Heartbeat(conn, data.client_id, req.language, req.version, data.consumer_data_set,
                         tuple(p.group_name for p in data.producer_data_set))
        return answer(req, self.membership.heartbeat(beat))

    def check_client_config(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        body = CheckClientRequestBody.from_json(req.body)
        return answer(req, self.membership.check(body.group, body.subscription_data))

    def unregister(self, conn: Connection, req: RemotingCommand) -> RemotingCommand:
        u = UnregisterClientRequestHeader.from_ext(req.ext_fields)
        self.membership.leave(Leaving(conn, u.producer_group, u.consumer_group))
        return req.response()
