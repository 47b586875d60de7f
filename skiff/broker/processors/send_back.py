"""CONSUMER_SEND_MSG_BACK (36): a consumer could not process a message; retry it later.

As RocketMQ's broker does (CONSUMER_SEND_MSG_BACK): the stored message is
re-put to ``%RETRY%<group>`` with reconsumeTimes + 1, ``RETRY_TOPIC`` (its
first topic) and ``ORIGIN_MESSAGE_ID`` set, and the delay level 3 +
reconsumeTimes (unless the consumer asked for a level), so it goes through
SCHEDULE_TOPIC_XXXX and comes back after 10 s, 30 s, 1 min, ... Once it has been
retried ``retryMaxTimes`` times (16, the group's setting; a client of version
V3_4_9 or later may send its own maximum), or when the consumer asks for a
negative level, it goes to the dead-letter topic ``%DLQ%<group>`` instead.

A message a consumer read through the tier (its CommitLog copy deleted by retention) is
re-put from the tier's copy, read on a worker thread (docs/tiered-storage.md).
"""

from __future__ import annotations

from collections.abc import Awaitable

from skiff.broker.config import BrokerConfig
from skiff.broker.groups import SubscriptionGroupManager
from skiff.broker.operations import MessagesOperation, Refusal, SendOperation
from skiff.broker.processors.send import put_response
from skiff.broker.requeue import Retry, requeue
from skiff.broker.topics import TopicConfigManager
from skiff.broker.writer import MessageWriter
from skiff.common.names import retry_topic
from skiff.protocol.bodies.admin import SubscriptionGroupConfig
from skiff.protocol.bodies.topic import Perm
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.command import RemotingCommand
from skiff.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from skiff.transport.connection import Connection, Handler

V3_4_9 = 121
"""MQVersion.V3_4_9's ordinal: from this client version on, the request's maxReconsumeTimes counts."""


class SendBackProcessor:
    def __init__(self, config: BrokerConfig, messages: MessagesOperation, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, writer: MessageWriter, sender: SendOperation) -> None:
        self.config = config
        self.messages = messages
        self.topics = topics
        self.groups = groups
        self.writer = writer
        self.sender = sender

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back}

    def send_back(self, conn: Connection, req: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        h = ConsumerSendMsgBackRequestHeader.from_ext(req.ext_fields)
        group = self.groups.find_or_create(h.group)
        if group is None:
            return req.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group {h.group} does not exist on this broker")
        if not self.config.broker_permission & Perm.WRITE:
            return req.response(ResponseCode.NO_PERMISSION,
                                f"the broker {self.config.broker_name} does not accept messages now")
        if group.retry_queue_nums <= 0:
            return req.response()
        record = self.messages.store.read_record(h.offset)
        if record is None and self.messages.tier_record is not None:
            return self._from_tier(req, h, group)
        return self._requeue(req, h, group, record)

    async def _from_tier(self, req: RemotingCommand, h: ConsumerSendMsgBackRequestHeader,
                         group: SubscriptionGroupConfig) -> RemotingCommand:
        """The send-back of a message only the tier holds (its read may fetch from the bucket)."""
        assert self.messages.tier_record is not None
        answered = self._requeue(req, h, group, await self.messages.tier_record(h.offset))
        assert isinstance(answered, RemotingCommand), answered  # a re-put is answered at once (wait=False)
        return answered

    def _requeue(self, req: RemotingCommand, h: ConsumerSendMsgBackRequestHeader, group: SubscriptionGroupConfig,
                 record: bytes | None) -> RemotingCommand | Awaitable[RemotingCommand]:
        if record is None:
            return req.response(ResponseCode.SYSTEM_ERROR, f"no message is stored at CommitLog offset {h.offset}")
        max_times = group.retry_max_times
        if req.version >= V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        # A negative level asks for the dead-letter topic at once.
        retry = None if h.delay_level < 0 else Retry(retry_topic(h.group), group.retry_queue_nums,
                                                          delay_level=h.delay_level)
        made = requeue(self.writer, self.topics, record, h.group, retry, max_times)
        if isinstance(made, str):
            return req.response(ResponseCode.SYSTEM_ERROR, made)
        answered = self.sender.append(None, made.queue_id, [made], len(made.body), False,
                                      lambda sent: put_response(req, sent))
        return req.response(answered.code, answered.reason) if isinstance(answered, Refusal) else answered
