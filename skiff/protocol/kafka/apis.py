"""The Kafka APIs Skiff serves, the versions it advertises, and their schemas.

The version set is the one docs/kafka.md explains: non-flexible versions every current
client shares (librdkafka 2.x, kafka-python 3.x, aiokafka 0.14), record batches v2 only,
ApiVersions up to v4 (flexible from v3). Field lists follow Kafka's
``common/message/<Api>{Request,Response}.json``; ``F(name, type, since, until)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skiff.protocol.kafka.schema import Array, F, Struct


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37


@dataclass(frozen=True, slots=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    first_flexible: int
    """The first version with compact fields and tagged sections (Kafka's flexibleVersions)."""
    request: Struct
    response: Struct

    def flexible(self, version: int) -> bool:
        return version >= self.first_flexible


NEVER_FLEXIBLE = 1 << 15
"""The first flexible version of an API that has none (SaslHandshake)."""

_I32S = Array("int32")

PRODUCE_REQUEST: Struct = (
    F("transactional_id", "nstring", 3),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", Array((
        F("name", "string"),
        F("partition_data", Array((F("index", "int32"), F("records", "nbytes")))),
    ))),
)
PRODUCE_RESPONSE: Struct = (
    F("responses", Array((
        F("name", "string"),
        F("partition_responses", Array((
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", 2),
            F("log_start_offset", "int64", 5),
            F("record_errors", Array((F("batch_index", "int32"), F("batch_index_error_message", "nstring"))), 8),
            F("error_message", "nstring", 8),
        ))),
    ))),
    F("throttle_time_ms", "int32", 1),
)

FETCH_REQUEST: Struct = (
    F("replica_id", "int32"),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", 3),
    F("isolation_level", "int8", 4),
    F("session_id", "int32", 7),
    F("session_epoch", "int32", 7),
    F("topics", Array((
        F("topic", "string"),
        F("partitions", Array((
            F("partition", "int32"),
            F("current_leader_epoch", "int32", 9),
            F("fetch_offset", "int64"),
            F("log_start_offset", "int64", 5),
            F("partition_max_bytes", "int32"),
        ))),
    ))),
    F("forgotten_topics_data", Array((F("topic", "string"), F("partitions", _I32S))), 7),
    F("rack_id", "string", 11),
)
FETCH_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 1),
    F("error_code", "int16", 7),
    F("session_id", "int32", 7),
    F("responses", Array((
        F("topic", "string"),
        F("partitions", Array((
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("high_watermark", "int64"),
            F("last_stable_offset", "int64", 4),
            F("log_start_offset", "int64", 5),
            F("aborted_transactions", Array((F("producer_id", "int64"), F("first_offset", "int64")), nullable=True), 4),
            F("preferred_read_replica", "int32", 11),
            F("records", "nbytes"),
        ))),
    ))),
)

LIST_OFFSETS_REQUEST: Struct = (
    F("replica_id", "int32"),
    F("isolation_level", "int8", 2),
    F("topics", Array((
        F("name", "string"),
        F("partitions", Array((
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", 4),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", 0, 0),
        ))),
    ))),
)
LIST_OFFSETS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 2),
    F("topics", Array((
        F("name", "string"),
        F("partitions", Array((
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("old_style_offsets", Array("int64"), 0, 0),
            F("timestamp", "int64", 1),
            F("offset", "int64", 1),
            F("leader_epoch", "int32", 4),
        ))),
    ))),
)

METADATA_REQUEST: Struct = (
    F("topics", Array((F("name", "string"),), nullable=True)),
    F("allow_auto_topic_creation", "bool", 4),
)
METADATA_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 3),
    F("brokers", Array((F("node_id", "int32"), F("host", "string"), F("port", "int32"), F("rack", "nstring", 1)))),
    F("cluster_id", "nstring", 2),
    F("controller_id", "int32", 1),
    F("topics", Array((
        F("error_code", "int16"),
        F("name", "string"),
        F("is_internal", "bool", 1),
        F("partitions", Array((
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", 7),
            F("replica_nodes", _I32S),
            F("isr_nodes", _I32S),
            F("offline_replicas", _I32S, 5),
        ))),
    ))),
)

OFFSET_COMMIT_REQUEST: Struct = (
    F("group_id", "string"),
    F("generation_id", "int32", 1),
    F("member_id", "string", 1),
    F("retention_time_ms", "int64", 2, 4),
    F("topics", Array((
        F("name", "string"),
        F("partitions", Array((
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_metadata", "nstring"),
        ))),
    ))),
)
OFFSET_COMMIT_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 3),
    F("topics", Array((
        F("name", "string"),
        F("partitions", Array((F("partition_index", "int32"), F("error_code", "int16")))),
    ))),
)

OFFSET_FETCH_REQUEST: Struct = (
    F("group_id", "string"),
    F("topics", Array((F("name", "string"), F("partition_indexes", _I32S)), nullable=True)),
)
OFFSET_FETCH_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 3),
    F("topics", Array((
        F("name", "string"),
        F("partitions", Array((
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("metadata", "nstring"),
            F("error_code", "int16"),
        ))),
    ))),
    F("error_code", "int16", 2),
)

FIND_COORDINATOR_REQUEST: Struct = (F("key", "string"), F("key_type", "int8", 1))
FIND_COORDINATOR_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 1),
    F("error_code", "int16"),
    F("error_message", "nstring", 1),
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
)

JOIN_GROUP_REQUEST: Struct = (
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", 1),
    F("member_id", "string"),
    F("group_instance_id", "nstring", 5),
    F("protocol_type", "string"),
    F("protocols", Array((F("name", "string"), F("metadata", "bytes")))),
)
JOIN_GROUP_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 2),
    F("error_code", "int16"),
    F("generation_id", "int32"),
    F("protocol_name", "string"),
    F("leader", "string"),
    F("member_id", "string"),
    F("members", Array((F("member_id", "string"), F("group_instance_id", "nstring", 5), F("metadata", "bytes")))),
)

SYNC_GROUP_REQUEST: Struct = (
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "nstring", 3),
    F("assignments", Array((F("member_id", "string"), F("assignment", "bytes")))),
)
SYNC_GROUP_RESPONSE: Struct = (F("throttle_time_ms", "int32", 1), F("error_code", "int16"), F("assignment", "bytes"))

HEARTBEAT_REQUEST: Struct = (
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "nstring", 3),
)
THROTTLE_AND_ERROR: Struct = (F("throttle_time_ms", "int32", 1), F("error_code", "int16"))
LEAVE_GROUP_REQUEST: Struct = (F("group_id", "string"), F("member_id", "string"))

DESCRIBE_GROUPS_REQUEST: Struct = (F("groups", Array("string")),)
DESCRIBE_GROUPS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 1),
    F("groups", Array((
        F("error_code", "int16"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", Array((
            F("member_id", "string"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ))),
    ))),
)
LIST_GROUPS_REQUEST: Struct = ()
LIST_GROUPS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 1),
    F("error_code", "int16"),
    F("groups", Array((F("group_id", "string"), F("protocol_type", "string")))),
)

SASL_HANDSHAKE_REQUEST: Struct = (F("mechanism", "string"),)
SASL_HANDSHAKE_RESPONSE: Struct = (F("error_code", "int16"), F("mechanisms", Array("string")))

SASL_AUTHENTICATE_REQUEST: Struct = (F("auth_bytes", "bytes"),)
SASL_AUTHENTICATE_RESPONSE: Struct = (
    F("error_code", "int16"),
    F("error_message", "nstring"),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", 1),
)

API_VERSIONS_REQUEST: Struct = (
    F("client_software_name", "string", 3),
    F("client_software_version", "string", 3),
)
API_VERSIONS_RESPONSE: Struct = (
    F("error_code", "int16"),
    F("api_keys", Array((F("api_key", "int16"), F("min_version", "int16"), F("max_version", "int16")))),
    F("throttle_time_ms", "int32", 1),
)

CREATE_TOPICS_REQUEST: Struct = (
    F("topics", Array((
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", Array((F("partition_index", "int32"), F("broker_ids", _I32S)))),
        F("configs", Array((F("name", "string"), F("value", "nstring")))),
    ))),
    F("timeout_ms", "int32"),
    F("validate_only", "bool", 1),
)
CREATE_TOPICS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 2),
    F("topics", Array((F("name", "string"), F("error_code", "int16"), F("error_message", "nstring", 1)))),
)

DELETE_TOPICS_REQUEST: Struct = (F("topic_names", Array("string")), F("timeout_ms", "int32"))
DELETE_TOPICS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32", 1),
    F("responses", Array((F("name", "string"), F("error_code", "int16")))),
)

INIT_PRODUCER_ID_REQUEST: Struct = (F("transactional_id", "nstring"), F("transaction_timeout_ms", "int32"))
INIT_PRODUCER_ID_RESPONSE: Struct = (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
)

DESCRIBE_CONFIGS_REQUEST: Struct = (
    F("resources", Array((
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", Array("string", nullable=True)),
    ))),
    F("include_synonyms", "bool", 1),
)
DESCRIBE_CONFIGS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32"),
    F("results", Array((
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", Array((
            F("name", "string"),
            F("value", "nstring"),
            F("read_only", "bool"),
            F("is_default", "bool", 0, 0),
            F("config_source", "int8", 1),
            F("is_sensitive", "bool"),
            F("synonyms", Array((F("name", "string"), F("value", "nstring"), F("source", "int8"))), 1),
        ))),
    ))),
)

ALTER_CONFIGS_REQUEST: Struct = (
    F("resources", Array((
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", Array((F("name", "string"), F("value", "nstring")))),
    ))),
    F("validate_only", "bool"),
)
ALTER_CONFIGS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32"),
    F("responses", Array((
        F("error_code", "int16"),
        F("error_message", "nstring"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
    ))),
)

CREATE_PARTITIONS_REQUEST: Struct = (
    F("topics", Array((
        F("name", "string"),
        F("count", "int32"),
        F("assignments", Array((F("broker_ids", _I32S),), nullable=True)),
    ))),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
)
CREATE_PARTITIONS_RESPONSE: Struct = (
    F("throttle_time_ms", "int32"),
    F("results", Array((F("name", "string"), F("error_code", "int16"), F("error_message", "nstring")))),
)

_ALL = (
    Api(ApiKey.PRODUCE, 3, 8, 9, PRODUCE_REQUEST, PRODUCE_RESPONSE),
    Api(ApiKey.FETCH, 4, 11, 12, FETCH_REQUEST, FETCH_RESPONSE),
    Api(ApiKey.LIST_OFFSETS, 1, 5, 6, LIST_OFFSETS_REQUEST, LIST_OFFSETS_RESPONSE),
    Api(ApiKey.METADATA, 1, 5, 9, METADATA_REQUEST, METADATA_RESPONSE),
    Api(ApiKey.OFFSET_COMMIT, 2, 3, 8, OFFSET_COMMIT_REQUEST, OFFSET_COMMIT_RESPONSE),
    Api(ApiKey.OFFSET_FETCH, 1, 3, 6, OFFSET_FETCH_REQUEST, OFFSET_FETCH_RESPONSE),
    Api(ApiKey.FIND_COORDINATOR, 0, 2, 3, FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE),
    Api(ApiKey.JOIN_GROUP, 2, 5, 6, JOIN_GROUP_REQUEST, JOIN_GROUP_RESPONSE),
    Api(ApiKey.HEARTBEAT, 0, 3, 4, HEARTBEAT_REQUEST, THROTTLE_AND_ERROR),
    Api(ApiKey.LEAVE_GROUP, 0, 2, 4, LEAVE_GROUP_REQUEST, THROTTLE_AND_ERROR),
    Api(ApiKey.SYNC_GROUP, 0, 3, 4, SYNC_GROUP_REQUEST, SYNC_GROUP_RESPONSE),
    Api(ApiKey.DESCRIBE_GROUPS, 0, 2, 5, DESCRIBE_GROUPS_REQUEST, DESCRIBE_GROUPS_RESPONSE),
    Api(ApiKey.LIST_GROUPS, 0, 2, 3, LIST_GROUPS_REQUEST, LIST_GROUPS_RESPONSE),
    Api(ApiKey.SASL_HANDSHAKE, 0, 1, NEVER_FLEXIBLE, SASL_HANDSHAKE_REQUEST, SASL_HANDSHAKE_RESPONSE),
    Api(ApiKey.API_VERSIONS, 0, 4, 3, API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
    Api(ApiKey.CREATE_TOPICS, 2, 4, 5, CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE),
    Api(ApiKey.DELETE_TOPICS, 1, 3, 4, DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE),
    Api(ApiKey.INIT_PRODUCER_ID, 0, 1, 2, INIT_PRODUCER_ID_REQUEST, INIT_PRODUCER_ID_RESPONSE),
    Api(ApiKey.DESCRIBE_CONFIGS, 1, 2, 4, DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
    Api(ApiKey.ALTER_CONFIGS, 0, 1, 2, ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE),
    Api(ApiKey.SASL_AUTHENTICATE, 0, 2, 2, SASL_AUTHENTICATE_REQUEST, SASL_AUTHENTICATE_RESPONSE),
    Api(ApiKey.CREATE_PARTITIONS, 0, 1, 2, CREATE_PARTITIONS_REQUEST, CREATE_PARTITIONS_RESPONSE),
)
APIS: dict[int, Api] = {int(a.key): a for a in _ALL}
"""Every API Skiff serves, by key: what ApiVersions advertises."""
