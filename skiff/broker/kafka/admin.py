"""Kafka's admin requests over Skiff's topic operation (`TopicsOperation`, the one the
remoting admin requests use, for reads as for changes): CreateTopics, DeleteTopics,
CreatePartitions, and the topic configs Skiff has, read by DescribeConfigs and set by
AlterConfigs.

| Kafka config | Skiff |
|---|---|
| ``cleanup.policy`` = delete / compact | topic attribute ``cleanup.policy`` = DELETE / COMPACTION |
| ``delete.retention.ms`` | topic attribute ``delete.retention.ms`` (tombstones of a compacted topic) |
| ``retention.ms`` | the broker's ``fileReservedTime`` (read-only: retention is per broker, not per topic) |

A partition is a queue: a topic's queues are its partitions on this broker, so the
replication factor and replica assignments of a request are not Skiff's to choose (the
broker group's slaves replicate every queue) and are ignored.
"""

from __future__ import annotations

from typing import Any

from skiff.broker.operations import Refusal, TopicChange, TopicsOperation
from skiff.common.limits import QUEUES_PER_TOPIC_MAX
from skiff.protocol.bodies.topic_attributes import (
    CLEANUP_POLICY,
    DEFAULT_DELETE_RETENTION_MS,
    DELETE_RETENTION_MS,
    CleanupPolicy,
)
from skiff.protocol.kafka.errors import ErrorCode

Body = dict[str, Any]
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
RETENTION_MS = "retention.ms"
_SOURCE_TOPIC, _SOURCE_STATIC_BROKER, _SOURCE_DEFAULT = 1, 4, 5
_POLICIES = {"delete": CleanupPolicy.DELETE, "compact": CleanupPolicy.COMPACTION}


class ConfigError(Exception):
    """A Kafka config Skiff cannot set: INVALID_CONFIG with this text."""


class TopicAdmin:
    def __init__(self, operation: TopicsOperation, default_partitions: int, retention_ms: int) -> None:
        """``operation``: every read and change of a topic (`TopicsOperation`, the remoting door's too)."""
        self.operation = operation
        self.default_partitions = default_partitions
        self.retention_ms = retention_ms

    async def create_topics(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for t in req["topics"]:
            name, n = t["name"], t["num_partitions"]
            n = self.default_partitions if n == -1 else n
            answer: Body = {"name": name, "error_code": 0, "error_message": None}
            if not isinstance(self.operation.get(name), Refusal):
                out.append(answer | _error(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name} already exists"))
                continue
            if not 1 <= n <= QUEUES_PER_TOPIC_MAX:
                out.append(answer | _error(ErrorCode.INVALID_PARTITIONS,
                                           f"{n} partitions: a topic has 1 to {QUEUES_PER_TOPIC_MAX} on a broker"))
                continue
            try:
                changes = attribute_changes({c["name"]: c["value"] for c in t["configs"]}, reset_others=False)
            except ConfigError as exc:
                out.append(answer | _error(ErrorCode.INVALID_CONFIG, str(exc)))
                continue
            refusal = self.operation.refusal(name)
            if refusal is None and not req.get("validate_only", False):
                outcome = await self.operation.put(TopicChange(name, n, n, attribute_changes=changes))
                refusal = outcome if isinstance(outcome, Refusal) else None
            out.append(answer if refusal is None else answer | _error(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                                      refusal.reason))
        return {"throttle_time_ms": 0, "topics": out}

    async def delete_topics(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for name in req["topic_names"]:
            code = ErrorCode.NONE
            if isinstance(self.operation.get(name), Refusal):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif await self.operation.delete(name) is not None:
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            out.append({"name": name, "error_code": int(code)})
        return {"throttle_time_ms": 0, "responses": out}

    async def create_partitions(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for t in req["topics"]:
            name, count = t["name"], t["count"]
            tc = self.operation.get(name)
            answer: Body = {"name": name, "error_code": 0, "error_message": None}
            if isinstance(tc, Refusal):
                answer |= _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
            elif not tc.read_queue_nums < count <= QUEUES_PER_TOPIC_MAX:
                answer |= _error(ErrorCode.INVALID_PARTITIONS, f"topic {name} has {tc.read_queue_nums} partitions; "
                                 f"it can grow to at most {QUEUES_PER_TOPIC_MAX}, never shrink")
            elif not req["validate_only"]:
                outcome = await self.operation.put(TopicChange(name, count, count, int(tc.perm),
                                                               tc.topic_filter_type.value, tc.topic_sys_flag, tc.order))
                if isinstance(outcome, Refusal):
                    answer |= _error(ErrorCode.INVALID_TOPIC_EXCEPTION, outcome.reason)
            out.append(answer)
        return {"throttle_time_ms": 0, "results": out}

    async def describe_configs(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for r in req["resources"]:
            kind, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
            result: Body = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name,
                            "configs": []}
            if kind == TOPIC_RESOURCE:
                tc = self.operation.get(name)
                if isinstance(tc, Refusal):
                    result |= _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name} does not exist")
                else:
                    configs = self._topic_configs(tc.attributes)
                    result["configs"] = [c for c in configs if keys is None or c["name"] in keys]
            elif kind != BROKER_RESOURCE:
                result |= _error(ErrorCode.INVALID_REQUEST, f"resource type {kind}: Skiff describes topics (2) "
                                                            f"and brokers (4)")
            out.append(result)
        return {"throttle_time_ms": 0, "results": out}

    def _topic_configs(self, attributes: Any) -> list[Body]:
        policy = attributes.get(CLEANUP_POLICY)
        tombstones = attributes.get(DELETE_RETENTION_MS)
        return [
            _config("cleanup.policy", "compact" if policy == CleanupPolicy.COMPACTION else "delete",
                    _SOURCE_DEFAULT if policy is None else _SOURCE_TOPIC),
            _config(DELETE_RETENTION_MS, str(DEFAULT_DELETE_RETENTION_MS if tombstones is None else tombstones),
                    _SOURCE_DEFAULT if tombstones is None else _SOURCE_TOPIC),
            _config(RETENTION_MS, str(self.retention_ms), _SOURCE_STATIC_BROKER, read_only=True),
        ]

    async def alter_configs(self, req: Body, header: Any, peer: tuple[str, int]) -> Body:
        out = []
        for r in req["resources"]:
            kind, name = r["resource_type"], r["resource_name"]
            answer: Body = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name}
            tc = self.operation.get(name) if kind == TOPIC_RESOURCE else None
            if tc is None or isinstance(tc, Refusal):
                out.append(answer | _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if kind == TOPIC_RESOURCE
                                           else ErrorCode.INVALID_REQUEST, f"no topic {name} to alter"))
                continue
            try:
                changes = attribute_changes({c["name"]: c["value"] for c in r["configs"]}, reset_others=True)
            except ConfigError as exc:
                out.append(answer | _error(ErrorCode.INVALID_CONFIG, str(exc)))
                continue
            if not req["validate_only"]:
                outcome = await self.operation.put(TopicChange(name, tc.read_queue_nums, tc.write_queue_nums,
                                                               int(tc.perm), tc.topic_filter_type.value,
                                                               tc.topic_sys_flag, tc.order, changes))
                if isinstance(outcome, Refusal):
                    answer |= _error(ErrorCode.INVALID_CONFIG, outcome.reason)
            out.append(answer)
        return {"throttle_time_ms": 0, "responses": out}


def attribute_changes(configs: dict[str, str | None], reset_others: bool) -> str:
    """Kafka topic configs as RocketMQ's attribute change text (``+name=value,-name``).
    ``reset_others``: AlterConfigs replaces a topic's whole config, so a config it leaves
    out goes back to its default."""
    parts = []
    for name, value in configs.items():
        if name == CLEANUP_POLICY:
            policy = _POLICIES.get((value or "").strip().lower())
            if policy is None:
                raise ConfigError(f"cleanup.policy={value!r}: Skiff's topics are delete or compact")
            parts.append(f"+{CLEANUP_POLICY}={policy.value}")
        elif name == DELETE_RETENTION_MS:
            if not (value or "").strip().isdigit():
                raise ConfigError(f"delete.retention.ms={value!r}: a whole number of milliseconds")
            parts.append(f"+{DELETE_RETENTION_MS}={int(value or 0)}")
        elif name == RETENTION_MS:
            raise ConfigError("retention.ms is the broker's fileReservedTime in Skiff, not a topic's config")
        else:
            raise ConfigError(f"topic config {name!r} is not one Skiff has (cleanup.policy, delete.retention.ms)")
    if reset_others:
        parts += [f"-{name}" for name in (CLEANUP_POLICY, DELETE_RETENTION_MS) if name not in configs]
    return ",".join(parts)


def _config(name: str, value: str, source: int, read_only: bool = False) -> Body:
    return {"name": name, "value": value, "read_only": read_only, "is_default": source == _SOURCE_DEFAULT,
            "config_source": source, "is_sensitive": False, "synonyms": []}


def _error(code: ErrorCode, message: str) -> Body:
    return {"error_code": int(code), "error_message": message}
