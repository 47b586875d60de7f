"""Which header class each request code carries, and which its success response carries.

The NameServer's codes are not listed here; their headers live in
`skiff.protocol.headers.namesrv`. Codes with a body but no header (HEART_BEAT,
LOCK_BATCH_MQ, GET_BROKER_RUNTIME_INFO, ...) are listed in docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from skiff.protocol.codes import RequestCode as C
from skiff.protocol.codes import PopRequestCode, SkiffRequestCode
from skiff.protocol.headers import admin, client_calls, consumer, pop, pull, query, send, timer, transaction
from skiff.protocol.headers.base import Header

REQUEST_HEADERS: Mapping[int, type[Header]] = MappingProxyType({
    C.SEND_MESSAGE: send.SendMessageRequestHeader,
    C.SEND_MESSAGE_V2: send.SendMessageRequestHeaderV2,
    C.SEND_BATCH_MESSAGE: send.SendMessageRequestHeaderV2,
    C.PULL_MESSAGE: pull.PullMessageRequestHeader,
    C.QUERY_CONSUMER_OFFSET: consumer.QueryConsumerOffsetRequestHeader,
    C.UPDATE_CONSUMER_OFFSET: consumer.UpdateConsumerOffsetRequestHeader,
    C.GET_CONSUMER_LIST_BY_GROUP: consumer.GetConsumerListByGroupRequestHeader,
    C.UNREGISTER_CLIENT: consumer.UnregisterClientRequestHeader,
    C.CONSUMER_SEND_MSG_BACK: consumer.ConsumerSendMsgBackRequestHeader,
    C.GET_MAX_OFFSET: consumer.QueueRequestHeader,
    C.GET_MIN_OFFSET: consumer.QueueRequestHeader,
    C.SEARCH_OFFSET_BY_TIMESTAMP: consumer.SearchOffsetRequestHeader,
    C.GET_EARLIEST_MSG_STORETIME: consumer.QueueRequestHeader,
    C.END_TRANSACTION: transaction.EndTransactionRequestHeader,
    C.CHECK_TRANSACTION_STATE: transaction.CheckTransactionStateRequestHeader,
    C.VIEW_MESSAGE_BY_ID: query.ViewMessageRequestHeader,
    C.QUERY_MESSAGE: query.QueryMessageRequestHeader,
    C.UPDATE_AND_CREATE_TOPIC: admin.CreateTopicRequestHeader,
    C.DELETE_TOPIC_IN_BROKER: admin.DeleteTopicRequestHeader,
    C.GET_TOPIC_STATS_INFO: admin.GetTopicStatsInfoRequestHeader,
    C.GET_CONSUME_STATS: admin.GetConsumeStatsRequestHeader,
    C.GET_CONSUMER_CONNECTION_LIST: admin.GetConsumerConnectionListRequestHeader,
    C.GET_PRODUCER_CONNECTION_LIST: admin.GetProducerConnectionListRequestHeader,
    C.DELETE_SUBSCRIPTIONGROUP: admin.DeleteSubscriptionGroupRequestHeader,
    C.QUERY_CONSUME_TIME_SPAN: admin.QueryConsumeTimeSpanRequestHeader,
    C.INVOKE_BROKER_TO_RESET_OFFSET: client_calls.ResetOffsetRequestHeader,
    C.GET_CONSUMER_RUNNING_INFO: client_calls.GetConsumerRunningInfoRequestHeader,
    C.NOTIFY_CONSUMER_IDS_CHANGED: client_calls.NotifyConsumerIdsChangedRequestHeader,
    C.RESET_CONSUMER_CLIENT_OFFSET: client_calls.ResetOffsetRequestHeader,
    C.GET_CONSUMER_STATUS_FROM_CLIENT: client_calls.GetConsumerStatusRequestHeader,
    SkiffRequestCode.CANCEL_SCHEDULED_MESSAGE: timer.CancelScheduledMessageRequestHeader,
    PopRequestCode.POP_MESSAGE: pop.PopMessageRequestHeader,
    PopRequestCode.ACK_MESSAGE: pop.AckMessageRequestHeader,
    PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME: pop.ChangeInvisibleTimeRequestHeader,
})

RESPONSE_HEADERS: Mapping[int, type[Header]] = MappingProxyType({
    C.SEND_MESSAGE: send.SendMessageResponseHeader,
    C.SEND_MESSAGE_V2: send.SendMessageResponseHeader,
    C.SEND_BATCH_MESSAGE: send.SendMessageResponseHeader,
    C.PULL_MESSAGE: pull.PullMessageResponseHeader,
    C.QUERY_CONSUMER_OFFSET: consumer.OffsetResponseHeader,
    C.GET_MAX_OFFSET: consumer.OffsetResponseHeader,
    C.GET_MIN_OFFSET: consumer.OffsetResponseHeader,
    C.SEARCH_OFFSET_BY_TIMESTAMP: consumer.OffsetResponseHeader,
    C.GET_EARLIEST_MSG_STORETIME: consumer.GetEarliestMsgStoretimeResponseHeader,
    C.QUERY_MESSAGE: query.QueryMessageResponseHeader,
    PopRequestCode.POP_MESSAGE: pop.PopMessageResponseHeader,
    PopRequestCode.CHANGE_MESSAGE_INVISIBLETIME: pop.ChangeInvisibleTimeResponseHeader,
})
