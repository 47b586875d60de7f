"""ACL 2.0 at the Kafka door: what each Kafka request touches, asked of the operations' gate
(`Gate.access`, the one check of every door) before the request is served, and the refusals
answered in Kafka's codes where Kafka's broker puts them.

| request | needs (any one action of a list suffices) | refused as |
|---|---|---|
| Produce | Topic Pub, per topic | TOPIC_AUTHORIZATION_FAILED on its partitions |
| Fetch | Topic Sub, per topic (a Kafka fetch names no group) | TOPIC_AUTHORIZATION_FAILED on its partitions |
| ListOffsets | Topic [Sub, Get], per topic | TOPIC_AUTHORIZATION_FAILED on its partitions |
| Metadata | Topic [Pub, Sub, Get], per topic; auto-creation also Topic Create | all topics: the others are left out; named ones: TOPIC_AUTHORIZATION_FAILED |
| OffsetCommit | Group Sub; Topic Sub per topic | GROUP_ / TOPIC_AUTHORIZATION_FAILED on the partitions |
| OffsetFetch | Group [Sub, Get]; Topic [Sub, Get] per topic | GROUP_AUTHORIZATION_FAILED; TOPIC_… on named topics, others left out |
| FindCoordinator (group) | Group [Sub, Get] | GROUP_AUTHORIZATION_FAILED |
| JoinGroup, SyncGroup, Heartbeat, LeaveGroup | Group Sub | GROUP_AUTHORIZATION_FAILED |
| DescribeGroups | Group [Sub, Get], per group | GROUP_AUTHORIZATION_FAILED for that group |
| ListGroups | Group [Sub, Get], per group | groups left out |
| CreateTopics / DeleteTopics / CreatePartitions | Topic Create / Delete / Update | TOPIC_AUTHORIZATION_FAILED for that topic |
| DescribeConfigs / AlterConfigs | Topic Get / Update; a broker: Cluster Get / Update | TOPIC_ / CLUSTER_AUTHORIZATION_FAILED for that resource |
| InitProducerId (idempotence), ApiVersions | nothing beyond authentication | — |

A request is cut to what the caller may touch, served, and the refused parts are added to
the answer, so one topic refused does not fail the others (Kafka's behaviour). Retry
topics name their group (as at the other doors).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from skiff.broker.auth import Need
from skiff.broker.auth.model import Action, Resource
from skiff.common.limits import AUTH_DECISIONS_CACHED
from skiff.common.names import is_retry_topic
from skiff.protocol.kafka.apis import ApiKey
from skiff.protocol.kafka.errors import ErrorCode

Body = dict[str, Any]
Allowed = Callable[[Need], bool]
"""Asks the gate about one need (the caller and the request are bound in)."""

PUB, SUB, GET, CREATE, UPDATE, DELETE = Action.PUB, Action.SUB, Action.GET, Action.CREATE, Action.UPDATE, Action.DELETE
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
_TOPIC = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
_GROUP = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
_CLUSTER = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@functools.lru_cache(maxsize=AUTH_DECISIONS_CACHED)
def topic_need(name: str, *actions: Action) -> Need:
    """Made once per topic and actions (remembered as many as the gate's decisions): a
    producer asks the same question with every request, and a Need is costly to make."""
    return Need.of(Resource.group(name), SUB) if is_retry_topic(name) else Need.of(Resource.topic(name), *actions)


@functools.lru_cache(maxsize=AUTH_DECISIONS_CACHED)
def group_need(name: str, *actions: Action) -> Need:
    return Need.of(Resource.group(name), *actions)


@dataclass
class Screened:
    """What screening a request decided: ``answer`` the whole request (no handler runs), or
    serve the cut request and let ``complete`` add the refused parts to its answer."""

    answer: Body | None = None
    complete: Callable[[Body], None] | None = None


def _split(items: list[Any], allowed: Callable[[Any], bool]) -> tuple[list[Any], list[Any]]:
    kept: list[Any] = []
    refused: list[Any] = []
    for item in items:
        (kept if allowed(item) else refused).append(item)
    return kept, refused


def _appending(key: str, entries: Iterable[Body]) -> Callable[[Body], None]:
    extra = list(entries)

    def complete(answer: Body) -> None:
        answer[key] = list(answer.get(key) or []) + extra
    return complete


def _filtering(key: str, keep: Callable[[Body], bool]) -> Callable[[Body], None]:
    def complete(answer: Body) -> None:
        answer[key] = [item for item in answer.get(key) or [] if keep(item)]
    return complete


def _cut_topics(req: Body, field: str, name: str, allowed: Allowed, *actions: Action) -> list[Body]:
    """Removes from ``req[field]`` the topics the caller may not touch; returns them."""
    kept, refused = _split(req[field], lambda t: allowed(topic_need(t[name], *actions)))
    req[field] = kept
    return refused


def _produce(req: Body, allowed: Allowed) -> Screened:
    refused = _cut_topics(req, "topic_data", "name", allowed, PUB)
    return Screened(complete=_appending("responses", (
        {"name": t["name"], "partition_responses": [
            {"index": p["index"], "error_code": _TOPIC, "base_offset": -1, "log_append_time_ms": -1,
             "log_start_offset": -1} for p in t["partition_data"]]} for t in refused)) if refused else None)


def _fetch(req: Body, allowed: Allowed) -> Screened:
    had = bool(req["topics"])
    refused = _cut_topics(req, "topics", "topic", allowed, SUB)
    if not refused:
        return Screened()
    complete = _appending("responses", (
        {"topic": t["topic"], "partitions": [
            {"partition_index": p["partition"], "error_code": _TOPIC, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "preferred_read_replica": -1, "records": b""}  # never null records
            for p in t["partitions"]]} for t in refused))
    if had and not req["topics"]:  # nothing left to wait for: answer at once instead of long-polling
        answer: Body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}
        complete(answer)
        return Screened(answer=answer)
    return Screened(complete=complete)


def _list_offsets(req: Body, allowed: Allowed) -> Screened:
    refused = _cut_topics(req, "topics", "name", allowed, SUB, GET)
    return Screened(complete=_appending("topics", (
        {"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": _TOPIC, "timestamp": -1, "offset": -1,
             "leader_epoch": -1} for p in t["partitions"]]} for t in refused)) if refused else None)


def _metadata(req: Body, allowed: Allowed) -> Screened:
    def visible(name: str) -> bool:
        return allowed(topic_need(name, PUB, SUB, GET))
    if req["topics"] is None:
        return Screened(complete=_filtering("topics", lambda t: visible(t["name"])))
    refused = _cut_topics(req, "topics", "name", allowed, PUB, SUB, GET)
    if req.get("allow_auto_topic_creation", True) and not all(
            allowed(topic_need(t["name"], CREATE)) for t in req["topics"]):
        req["allow_auto_topic_creation"] = False  # a missing topic then answers UNKNOWN_TOPIC_OR_PARTITION
    return Screened(complete=_appending("topics", (
        {"error_code": _TOPIC, "name": t["name"], "is_internal": False, "partitions": []}
        for t in refused)) if refused else None)


def _offset_commit(req: Body, allowed: Allowed) -> Screened:
    if not allowed(group_need(req["group_id"], SUB)):
        return Screened(answer={"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": _GROUP}
                                               for p in t["partitions"]]} for t in req["topics"]]})
    refused = _cut_topics(req, "topics", "name", allowed, SUB)
    return Screened(complete=_appending("topics", (
        {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": _TOPIC}
                                           for p in t["partitions"]]} for t in refused)) if refused else None)


def _offset_fetch(req: Body, allowed: Allowed) -> Screened:
    def no_offset(q: int, code: int) -> Body:
        return {"partition_index": q, "committed_offset": -1, "metadata": None, "error_code": code}
    if not allowed(group_need(req["group_id"], SUB, GET)):
        return Screened(answer={"throttle_time_ms": 0, "error_code": _GROUP, "topics": [
            {"name": t["name"], "partitions": [no_offset(q, _GROUP) for q in t["partition_indexes"]]}
            for t in req["topics"] or []]})
    if req["topics"] is None:
        return Screened(complete=_filtering("topics", lambda t: allowed(topic_need(t["name"], SUB, GET))))
    refused = _cut_topics(req, "topics", "name", allowed, SUB, GET)
    return Screened(complete=_appending("topics", (
        {"name": t["name"], "partitions": [no_offset(q, _TOPIC) for q in t["partition_indexes"]]}
        for t in refused)) if refused else None)


def _find_coordinator(req: Body, allowed: Allowed) -> Screened:
    if req.get("key_type", 0) == 0 and not allowed(group_need(req["key"], SUB, GET)):
        return Screened(answer={"throttle_time_ms": 0, "error_code": _GROUP,
                                "error_message": f"not authorized to use group {req['key']}",
                                "node_id": -1, "host": "", "port": -1})
    return Screened()


def _group_member(error_body: Body) -> Callable[[Body, Allowed], Screened]:
    def screen(req: Body, allowed: Allowed) -> Screened:
        if allowed(group_need(req["group_id"], SUB)):
            return Screened()
        return Screened(answer={"throttle_time_ms": 0, "error_code": _GROUP, **error_body})
    return screen


def _describe_groups(req: Body, allowed: Allowed) -> Screened:
    req["groups"], refused = _split(req["groups"], lambda g: allowed(group_need(g, SUB, GET)))
    return Screened(complete=_appending("groups", (
        {"error_code": _GROUP, "group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "",
         "members": []} for g in refused)) if refused else None)


def _list_groups(req: Body, allowed: Allowed) -> Screened:
    return Screened(complete=_filtering("groups", lambda g: allowed(group_need(g["group_id"], SUB, GET))))


def _topic_admin(field: str, answer_key: str, action: Action) -> Callable[[Body, Allowed], Screened]:
    """CreateTopics, DeleteTopics (a list of names), CreatePartitions."""
    def name(item: Any) -> str:
        return item if isinstance(item, str) else str(item["name"])

    def screen(req: Body, allowed: Allowed) -> Screened:
        req[field], refused = _split(req[field], lambda t: allowed(topic_need(name(t), action)))
        return Screened(complete=_appending(answer_key, (
            {"name": name(t), "error_code": _TOPIC, "error_message": f"not authorized to {action.title} the topic"}
            for t in refused)) if refused else None)
    return screen


def _configs(answer_key: str, action: Action, cluster: str) -> Callable[[Body, Allowed], Screened]:
    """DescribeConfigs, AlterConfigs: a topic's by the topic, a broker's by the cluster."""
    def need(r: Body) -> Need | None:
        if r["resource_type"] == TOPIC_RESOURCE:
            return topic_need(r["resource_name"], action)
        if r["resource_type"] == BROKER_RESOURCE:
            return Need.of(Resource.cluster(cluster), action)
        return None  # the handler answers what it does not serve

    def screen(req: Body, allowed: Allowed) -> Screened:
        def ok(r: Body) -> bool:
            n = need(r)
            return n is None or allowed(n)
        req["resources"], refused = _split(req["resources"], ok)
        return Screened(complete=_appending(answer_key, (
            {"error_code": _TOPIC if r["resource_type"] == TOPIC_RESOURCE else _CLUSTER,
             "error_message": f"not authorized to {action.title} this resource's configs",
             "resource_type": r["resource_type"], "resource_name": r["resource_name"], "configs": []}
            for r in refused)) if refused else None)
    return screen


def screens(cluster: str) -> dict[int, Callable[[Body, Allowed], Screened]]:
    """Each API's screen; an API without one needs nothing beyond authentication."""
    return {
        ApiKey.PRODUCE: _produce,
        ApiKey.FETCH: _fetch,
        ApiKey.LIST_OFFSETS: _list_offsets,
        ApiKey.METADATA: _metadata,
        ApiKey.OFFSET_COMMIT: _offset_commit,
        ApiKey.OFFSET_FETCH: _offset_fetch,
        ApiKey.FIND_COORDINATOR: _find_coordinator,
        ApiKey.JOIN_GROUP: _group_member({"generation_id": -1, "protocol_name": "", "leader": "", "member_id": "",
                                          "members": []}),
        ApiKey.SYNC_GROUP: _group_member({"assignment": b""}),
        ApiKey.HEARTBEAT: _group_member({}),
        ApiKey.LEAVE_GROUP: _group_member({}),
        ApiKey.DESCRIBE_GROUPS: _describe_groups,
        ApiKey.LIST_GROUPS: _list_groups,
        ApiKey.CREATE_TOPICS: _topic_admin("topics", "topics", CREATE),
        ApiKey.DELETE_TOPICS: _topic_admin("topic_names", "responses", DELETE),
        ApiKey.CREATE_PARTITIONS: _topic_admin("topics", "results", UPDATE),
        ApiKey.DESCRIBE_CONFIGS: _configs("results", GET, cluster),
        ApiKey.ALTER_CONFIGS: _configs("responses", UPDATE, cluster),
    }
