"""Request, response and language codes, with RocketMQ's numeric values.

Checked against RocketMQ 4.9.7's RequestCode.java, ResponseCode.java and
RemotingSysResponseCode.java: every code there is here, with the same value.
"""

from enum import IntEnum


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    QUERY_CONSUME_TIME_SPAN = 303
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329


class SkiffRequestCode(IntEnum):
    """Skiff's own admin requests, for features RocketMQ has no request for.

    Numbered from 10000: RocketMQ 4.x uses codes below 1000, and 5.x adds 1001-3xxx
    (controller, cold data, auth) and 200050 up (pop); nothing lies between 10000 and
    200000 in either, so no RocketMQ client sends these and a RocketMQ broker answers
    them REQUEST_CODE_NOT_SUPPORTED. They fit the ROCKETMQ header's 16-bit code.
    """

    GET_TIMER_SLOTS = 10001
    """Scheduled messages per timer slot, and the timer's counters (`skiff timer slots`)."""
    CANCEL_SCHEDULED_MESSAGE = 10002
    """Cancel a scheduled message by UNIQ_KEY or offsetMsgId (`skiff timer cancel`)."""
    GET_COMPACTION_STATUS = 10010
    """A topic's cleanup policy and each queue's compaction state (`skiff topic compact-status`)."""
    COMPACT_TOPIC = 10011
    """Compact every queue of a compacted topic now (`skiff topic compact`)."""
    GET_TIER_STATUS = 10020
    """A tiered topic's state per queue: uploaded up to, bytes local and remote, lag (`skiff topic tier status`)."""
    TIER_UPLOAD_NOW = 10021
    """Run the tier's uploader over a topic now and answer its state (`skiff topic tier upload`)."""


class AuthRequestCode(IntEnum):
    """RocketMQ 5.3's ACL 2.0 admin requests (users and ACLs; docs/acl.md)."""

    AUTH_CREATE_USER = 3001
    AUTH_UPDATE_USER = 3002
    AUTH_DELETE_USER = 3003
    AUTH_GET_USER = 3004
    AUTH_LIST_USER = 3005
    AUTH_CREATE_ACL = 3006
    AUTH_UPDATE_ACL = 3007
    AUTH_DELETE_ACL = 3008
    AUTH_GET_ACL = 3009
    AUTH_LIST_ACL = 3010


class PopRequestCode(IntEnum):
    """RocketMQ 5.x's POP consumption requests (``RequestCode.POP_MESSAGE`` ...).

    Above 16 bits: they travel only in JSON-serialized headers (the ROCKETMQ binary
    header holds a 16-bit code), as a 5.x client sends them.
    """

    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053


class PopResponseCode(IntEnum):
    """5.x response codes of POP that reuse 4.x numbers (209 and 210 were ACL codes in 4.x)."""

    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215


class LanguageCode(IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


SKIFF_VERSION = 407
"""The MQVersion ordinal Skiff sends (V4_9_7: RocketMQ's ``MQVersion.Version`` enum,
skiff/protocol/mq_version.py; 406, sent until 2026-11-27, is V4_9_7_SNAPSHOT): new enough
that a Java NameServer answers with standard JSON (quoted map keys)."""
