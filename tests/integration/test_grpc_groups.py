"""Consumer groups' settings as 5.x (gRPC) clients meet them, in process
(skiff.testing.grpc_wire), against a real broker.

A consumeMessageOrderly group is made with the admin API and the CLI (every setting of
``mqadmin updateSubGroup``); a gRPC receive of such a group pops every queue of the topic
orderly, whatever queue it names (as RocketMQ 5's proxy pops the broker's queue -1): the
official Node.js client always names queue 0, and messages of queue 3 reached it never.
A group's retry policy is the backoff its consumers' Settings carry. A topic's message.type
decides what 5.x producers may send to it, as the proxy's check.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skiff.cli.main import main as cli_main
from skiff.client.admin import AsyncAdmin
from skiff.common.message import Message
from skiff.client.errors import MessageValidationError
from skiff.protocol.bodies.admin import (
    CustomizedRetryPolicy,
    ExponentialRetryPolicy,
    GroupRetryPolicy,
    RetryPolicyType,
    SubscriptionGroupConfig,
)
from skiff.protocol.codes import RequestCode, ResponseCode
from skiff.protocol.errors import ResponseError
from skiff.protocol.headers.admin import CreateTopicRequestHeader
from skiff.protocol.v5 import definition_pb2 as pb
from skiff.protocol.v5 import service_pb2 as rpc
from skiff.testing.cluster import Cluster
from skiff.testing.grpc_wire import GrpcWire, first_status, messages
from skiff.testing.processes import free_port
from skiff.testing.wire import BrokerWire

TOPIC, ORDERLY, PLAIN = "FifoQ", "G-fifo-orderly", "G-fifo-plain"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    port, metrics_port = free_port(), free_port()
    with Cluster(tmp_path_factory.mktemp("fifo"),
                 broker_args=[f"--grpcServerPort={port}", f"--metricsPort={metrics_port}"]) as c:
        c.grpc_endpoint = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
        c.metrics_port = metrics_port  # type: ignore[attr-defined]
        yield c


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _admin(cluster: Cluster, work: Any) -> Any:
    admin = AsyncAdmin(cluster.namesrv_addr)
    await admin.start()
    try:
        return await work(admin)
    finally:
        await admin.shutdown()


def test_an_orderly_group_is_made_and_changed_by_the_admin_api_and_the_cli(cluster: Cluster):
    async def made(admin: AsyncAdmin) -> Any:
        await admin.create_consumer_group(ORDERLY, consume_message_orderly=True, retry_max_times=3)
        await admin.update_consumer_group(ORDERLY, consume_broadcast_enable=False)
        return await admin.consumer_group_configs(ORDERLY)
    [config] = run(_admin(cluster, made)).values()
    assert (config.consume_message_orderly, config.retry_max_times, config.consume_broadcast_enable) == (True, 3, False)

    def cli(*args: str) -> tuple[int, str, str]:
        """The `skiff` command in this process (its parser, admin calls and output)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main([*args, "-n", cluster.namesrv_addr])
            except SystemExit as exc:  # argparse's refusal of a bad value
                code = int(exc.code or 0)
        return code, out.getvalue(), err.getvalue()

    def skiff(*args: str) -> Any:
        code, out, err = cli(*args, "--json")
        assert code == 0, err
        return json.loads(out)
    assert skiff("consumer", "create", "-g", "G-cli-fifo", "--orderly", "true", "-r", "2")["group"] == "G-cli-fifo"
    changed = skiff("consumer", "update", "-g", "G-cli-fifo", "--consume-enable", "false", "-p",
                    '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":8000,"multiplier":2}}')
    assert set(changed["changed"]) == {"consume_enable", "group_retry_policy"}
    [made] = run(_admin(cluster, lambda admin: admin.consumer_group_configs("G-cli-fifo"))).values()
    assert (made.consume_message_orderly, made.retry_max_times, made.consume_enable) == (True, 2, False)
    assert made.group_retry_policy == GroupRetryPolicy(RetryPolicyType.EXPONENTIAL, ExponentialRetryPolicy(1000, 8000, 2))
    wrong = GroupRetryPolicy(RetryPolicyType.EXPONENTIAL, ExponentialRetryPolicy(0, 1000, 2))
    with pytest.raises(ResponseError, match="0 < initial <= max"):
        run(_admin(cluster, lambda admin: admin.create_consumer_group("G-wrong", group_retry_policy=wrong)))
    code, _, err = cli("consumer", "update", "-g", "G-cli-fifo", "--orderly", "yes")
    assert code == 2 and "'yes' is not true or false" in err


def test_group_attributes_are_patched_by_the_admin_api_and_the_cli_and_reach_lite_clients(cluster: Cluster):
    """RocketMQ 5's group attributes: each change names only what it changes (the broker applies
    it as a patch, as RocketMQ's), a settings change keeps them, and 5.5's lite quota reaches a
    lite consumer's Settings. Unknown names and bad values are refused by the client and the broker."""
    group = "G-attrs"

    async def made(admin: AsyncAdmin) -> Any:
        await admin.create_consumer_group(group, attributes={"lite.bind.topic": "AttrParent",
                                                             "lite.sub.client.quota": "100"})
        await admin.update_consumer_group(group, retry_max_times=1)
        return await admin.consumer_group_configs(group)
    [config] = run(_admin(cluster, made)).values()
    assert (dict(config.attributes), config.retry_max_times) == (
        {"lite.bind.topic": "AttrParent", "lite.sub.client.quota": "100"}, 1)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["consumer", "update", "-g", group, "--attributes=+lite.sub.model=exclusive,"
                         "-lite.sub.client.quota,+lite.sub.wildcard=TRUE", "-n", cluster.namesrv_addr]) == 0
    assert "G-attrs" in out.getvalue()
    [config] = run(_admin(cluster, lambda admin: admin.consumer_group_configs(group))).values()
    assert dict(config.attributes) == {"lite.bind.topic": "AttrParent", "lite.sub.model": "Exclusive",
                                       "lite.sub.wildcard": "true"}
    run(_admin(cluster, lambda admin: admin.update_consumer_group(group, attributes={"lite.sub.client.quota": "7"})))

    async def settings() -> Any:
        grpc = GrpcWire(cluster.grpc_endpoint, "attr-lite-client")  # type: ignore[attr-defined]
        try:
            return await grpc.settings(pb.Settings(client_type=pb.LITE_SIMPLE_CONSUMER, subscription=pb.Subscription(
                group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                    topic=pb.Resource(name="AttrParent"), expression=pb.FilterExpression(type=pb.TAG, expression="*"))])))
        finally:
            await grpc.close()
    assert run(settings()).settings.subscription.lite_subscription_quota == 7

    with pytest.raises(MessageValidationError, match="unknown consumer group attribute 'lite.nope'"):
        run(_admin(cluster, lambda admin: admin.update_consumer_group(group, attributes={"lite.nope": "1"})))
    with pytest.raises(MessageValidationError, match="lite.sub.client.quota='x': must be a whole number"):
        run(_admin(cluster, lambda admin: admin.create_consumer_group(group, attributes={"lite.sub.client.quota": "x"})))

    async def raw(body: SubscriptionGroupConfig) -> Any:
        wire = BrokerWire(cluster.broker_addr())
        try:
            return await wire.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body.to_json())
        finally:
            await wire.close()
    refused = run(raw(SubscriptionGroupConfig(group, attributes={"+lite.sub.client.max.event.cnt": "3"})))
    assert refused.code != ResponseCode.SUCCESS and "must be 10 or more" in (refused.remark or "")
    [config] = run(_admin(cluster, lambda admin: admin.consumer_group_configs(group))).values()
    assert config.attributes["lite.sub.client.quota"] == "7"  # the refused patch changed nothing


def test_an_orderly_receive_pops_every_queue_whatever_queue_it_names(cluster: Cluster):
    """20 messages in queue 3; the receive names queue 0 (as the Node.js client does). The
    orderly group gets them all, in order, and the queue stays blocked until they are acked."""
    async def test() -> None:
        wire, grpc = BrokerWire(cluster.broker_addr()), GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        try:
            header = CreateTopicRequestHeader(TOPIC, "TBW102", 4, 4, 6, "SINGLE_TAG")
            assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
            for i in range(20):
                sent = await wire.send(Message.of(TOPIC, f"m{i}".encode()), queue_id=3)
                assert sent.code == ResponseCode.SUCCESS, sent.remark
            await _admin(cluster, lambda admin: admin.create_consumer_group(ORDERLY, consume_message_orderly=True))
            first = messages(await grpc.receive(ORDERLY, TOPIC, queue_id=0, batch=32))
            assert [m.body for m in first] == [f"m{i}".encode() for i in range(20)]
            assert {m.system_properties.queue_id for m in first} == {3}
            blocked = await grpc.receive(ORDERLY, TOPIC, queue_id=3)
            assert first_status(blocked).code == pb.MESSAGE_NOT_FOUND  # the batch is not acked yet
            for m in first[:-1]:
                assert (await grpc.ack(ORDERLY, TOPIC, m.system_properties.receipt_handle)).status.code == pb.OK
            assert first_status(await grpc.receive(ORDERLY, TOPIC, queue_id=0)).code == pb.MESSAGE_NOT_FOUND
            assert (await grpc.ack(ORDERLY, TOPIC, first[-1].system_properties.receipt_handle)).status.code == pb.OK
            more = await wire.send(Message.of(TOPIC, b"m20"), queue_id=3)
            assert more.code == ResponseCode.SUCCESS
            assert [m.body for m in messages(await grpc.receive(ORDERLY, TOPIC, queue_id=1))] == [b"m20"]
        finally:
            await wire.close()
            await grpc.close()
    run(test())


def test_a_groups_retry_policy_is_its_consumers_backoff(cluster: Cluster):
    exponential = GroupRetryPolicy(RetryPolicyType.EXPONENTIAL, ExponentialRetryPolicy(2_000, 60_000, 3))
    custom = GroupRetryPolicy(customized_retry_policy=CustomizedRetryPolicy((1_000, 4_000)))

    async def test() -> None:
        async def made(admin: AsyncAdmin) -> None:
            await admin.create_consumer_group("G-exp", group_retry_policy=exponential, retry_max_times=4)
            await admin.create_consumer_group("G-custom", group_retry_policy=custom)
            await admin.update_consumer_group("G-custom", retry_max_times=2)
        await _admin(cluster, made)
        grpc = GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        try:
            replies = {}
            for group in ("G-exp", "G-custom", "G-default"):
                settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
                    group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                        topic=pb.Resource(name=TOPIC), expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
                reply = await grpc.settings(settings)
                assert reply.status.code == pb.OK, reply.status.message
                replies[group] = reply.settings.backoff_policy
        finally:
            await grpc.close()
        exp = replies["G-exp"]
        assert (exp.max_attempts, exp.WhichOneof("strategy")) == (5, "exponential_backoff")
        assert (exp.exponential_backoff.initial.ToMilliseconds(), exp.exponential_backoff.max.ToMilliseconds(),
                exp.exponential_backoff.multiplier) == (2_000, 60_000, 3)
        got = replies["G-custom"]
        assert got.max_attempts == 3 and [d.ToMilliseconds() for d in got.customized_backoff.next] == [1_000, 4_000]
        default = replies["G-default"]  # the broker's delay levels: 1s 5s 10s 30s 1m ... 2h
        assert [d.ToMilliseconds() for d in default.customized_backoff.next][:4] == [1_000, 5_000, 10_000, 30_000]
    run(test())


def test_a_topics_message_type_decides_what_grpc_producers_may_send(cluster: Cluster):
    def message(topic: str, i: int, **sp: Any) -> pb.Message:
        return pb.Message(topic=pb.Resource(name=topic), body=b"x", system_properties=pb.SystemProperties(
            message_id=f"{i:032X}", body_encoding=pb.IDENTITY, **sp))
    fifo = {"message_type": pb.FIFO, "message_group": "g"}
    priority = {"message_type": pb.PRIORITY, "priority": 2}
    normal = {"message_type": pb.NORMAL}

    async def test() -> None:
        wire, grpc = BrokerWire(cluster.broker_addr()), GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        try:
            for topic, kind in (("TNormal", "NORMAL"), ("TFifo", "FIFO"), ("TMixed", "MIXED"), ("TPlain", None),
                                ("TPriority", "PRIORITY")):
                header = CreateTopicRequestHeader(topic, "TBW102", 4, 4, 6, "SINGLE_TAG",
                                                  attributes=f"+message.type={kind}" if kind else None)
                resp = await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            answers = {}
            for n, (topic, sp) in enumerate((("TNormal", fifo), ("TFifo", normal), ("TMixed", fifo), ("TPlain", fifo),
                                             ("TPlain", priority), ("TMixed", priority), ("TPriority", priority))):
                sent = await grpc.unary("SendMessage", rpc.SendMessageRequest(messages=[message(topic, n, **sp)]),
                                        rpc.SendMessageResponse)
                answers[(topic, pb.MessageType.Name(sp["message_type"]))] = (sent.status.code, sent.status.message,
                                                                             sent.entries[0].offset)
            conflict = pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
            assert answers[("TNormal", "FIFO")][:2] == (conflict, "the topic TNormal takes NORMAL messages "
                                                                  "(message.type), not FIFO")
            assert answers[("TFifo", "NORMAL")][0] == conflict
            assert answers[("TPlain", "PRIORITY")][0] == conflict and answers[("TMixed", "PRIORITY")][0] == conflict
            assert {answers[k][0] for k in (("TMixed", "FIFO"), ("TPlain", "FIFO"), ("TPriority", "PRIORITY"))} == {
                pb.OK}
            routes = {}
            for topic in ("TNormal", "TMixed", "TPriority"):
                route = await grpc.unary("QueryRoute", rpc.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                         rpc.QueryRouteResponse)
                routes[topic] = sorted(pb.MessageType.Name(t) for t in route.message_queues[0].accept_message_types)
            assert routes == {"TNormal": ["NORMAL"], "TMixed": ["DELAY", "FIFO", "NORMAL", "TRANSACTION"],
                              "TPriority": ["PRIORITY"]}
            stored = await wire.pull_messages("G-look", "TPriority", 2)  # priority 2: queue 2
            assert [m.properties.get("_SYS_MSG_PRIORITY_") for m in stored] == ["2"]
        finally:
            await wire.close()
            await grpc.close()
    run(test())


def test_a_grpc_consumer_is_online_with_its_pop_lag(cluster: Cluster):
    """A 5.x consumer's Settings make it a member of its group (the admin API's connections,
    what the dashboard and `skiff consumer connections` read); its group's progress counts
    messages not yet popped plus those popped and not acknowledged."""
    group, topic = "G-online", "TOnline"

    async def test() -> None:
        wire, grpc = BrokerWire(cluster.broker_addr()), GrpcWire(cluster.grpc_endpoint)  # type: ignore[attr-defined]
        admin = AsyncAdmin(cluster.namesrv_addr)
        await admin.start()
        try:
            header = CreateTopicRequestHeader(topic, "TBW102", 1, 1, 6, "SINGLE_TAG")
            assert (await wire.call(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())).code == ResponseCode.SUCCESS
            for i in range(5):
                assert (await wire.send(Message.of(topic, f"o{i}".encode()))).code == ResponseCode.SUCCESS
            settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, user_agent=pb.UA(language=pb.PYTHON, version="5.1.2"),
                                   subscription=pb.Subscription(group=pb.Resource(name=group), subscriptions=[
                                       pb.SubscriptionEntry(topic=pb.Resource(name=topic), expression=pb.FilterExpression(
                                           type=pb.TAG, expression="TagA || TagB"))]))
            assert (await grpc.settings(settings)).status.code == pb.OK
            conns = await admin.consumer_connections(group)
            assert [(c.client_id, c.language, c.version, c.version_name) for c in conns.connections] == [
                ("skiff-test-client", "PYTHON", 437, "V5_1_2")]  # the user agent's 5.1.2, not a fixed V5_0_0
            assert {t: s.sub_string for t, s in conns.subscriptions.items()} == {topic: "TagA || TagB"}
            taken = messages(await grpc.receive(group, topic, batch=3))
            assert len(taken) == 3
            progress = await admin.consumer_progress(group, topic)
            assert [(q.lag, q.in_flight) for q in progress.queues] == [(5, 3)]
            assert (await admin.consumer_progress(group)).total_lag == 5  # its topics: those it pops, before an ack
            gauges = await asyncio.to_thread(pop_gauges, cluster.metrics_port, group)  # type: ignore[attr-defined]
            assert gauges == {"rocketmq_consumer_lag_messages": 5, "rocketmq_consumer_inflight_messages": 3,
                              "rocketmq_consumer_ready_messages": 2}
            for m in taken[:2]:
                assert (await grpc.ack(group, topic, m.system_properties.receipt_handle)).status.code == pb.OK
            progress = await admin.consumer_progress(group, topic)
            assert [(q.lag, q.in_flight, q.pull_offset) for q in progress.queues] == [(3, 1, 3)]
        finally:
            await admin.shutdown()
            await wire.close()
            await grpc.close()
    run(test())


def pop_gauges(port: int, group: str) -> dict[str, float]:
    """The broker's Prometheus gauges of ``group``'s queue 0 (the lag family)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.labels.get("consumer_group") == group and s.labels.get("queue_id") == "0"
            and s.name in ("rocketmq_consumer_lag_messages", "rocketmq_consumer_inflight_messages",
                           "rocketmq_consumer_ready_messages")}


def test_a_terminated_grpc_consumer_leaves_its_group_as_a_closed_connection(cluster: Cluster):
    """NotifyClientTermination drops the client's registrations through the membership
    operation, as a remoting connection that closes: the group has nobody online after it."""
    group = "G-terminating"

    async def test() -> None:
        grpc = GrpcWire(cluster.grpc_endpoint, client_id="terminating-client")  # type: ignore[attr-defined]
        admin = AsyncAdmin(cluster.namesrv_addr)
        await admin.start()
        try:
            settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, user_agent=pb.UA(language=pb.PYTHON),
                                   subscription=pb.Subscription(group=pb.Resource(name=group)))
            assert (await grpc.settings(settings)).status.code == pb.OK
            conns = await admin.consumer_connections(group)
            assert [c.client_id for c in conns.connections] == ["terminating-client"]
            answer = await grpc.unary("NotifyClientTermination",
                                      rpc.NotifyClientTerminationRequest(group=pb.Resource(name=group)),
                                      rpc.NotifyClientTerminationResponse)
            assert answer.status.code == pb.OK
            with pytest.raises(ResponseError) as gone:
                await admin.consumer_connections(group)
            assert gone.value.code == ResponseCode.CONSUMER_NOT_ONLINE
        finally:
            await admin.shutdown()
            await grpc.close()
    run(test())
